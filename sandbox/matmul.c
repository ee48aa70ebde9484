/*
 * sandbox/matmul.c — one candidate kernel behind many GEMMs, sandboxed: the
 * lab's --policy-matmul on the CPU (lab/policy_matmul.c) runs the policy's
 * matmuls through a results file's best kernel, and that kernel is text a
 * policy wrote. On cpu-emu it is native code, so it runs where every
 * candidate runs: in a worker (`kernlab __worker matmul-cpu-emu`) confined
 * by `run-cpu-emu`, the module loaded, then `run-cpu-emu-loaded` stacked.
 * Unlike a run worker it serves many requests: the module stays loaded and
 * each request is one kl_emu_run.
 *
 *   open   spawn, READY, a LOAD frame (the .so's path), LOADED (the load and
 *          its launch geometry checked in the worker);
 *   run    A and B copied into the worker's memfd (descriptor 5; A, B, C
 *          between canary bands, sbx_mm_layout; grown by the supervisor
 *          only), a GO frame (M, N, K), DONE; the bands and the inputs
 *          checked, C copied out. Each request has the deadline given at
 *          open.
 *   close  the request pipe closed: the worker exits.
 * A trap, a crash, a timeout, a malformed frame, or a write outside C or
 * into A or B (which the harness flags canary_overwritten, input_mutated)
 * ends the worker; the server is then dead and every later request fails at
 * once with the same message (the lab falls back to BLAS and says so).
 *
 * The worker's RLIMIT_CPU (SBX_RUN_CPU_LIMIT_S) holds for its whole life,
 * which for a run worker is one candidate but here is every GEMM of a long
 * command: a healthy kernel would be killed by it after ten CPU minutes
 * and reported as a crash. So before a request the server reads the
 * worker's CPU time (/proc/PID/stat) and, past half the limit, ends it and
 * starts a fresh one with the same module. A single GEMM stays held to
 * the deadline and to what remains of the limit. The worker's memfd is
 * its own, so nothing it writes there after a reply reaches anything but
 * its own next request.
 */
#define _GNU_SOURCE
#include "sandbox/sandbox_internal.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

struct sbx_matmul {
  sbx_worker w;
  pthread_mutex_t mu;
  double deadline_ms;
  sbx_mm_load load;   /* what every worker of the server loads */
  double recycle_cpu; /* CPU seconds of a worker before a fresh one */
  int restarts;
  float *map; /* the memfd, mapped here */
  size_t map_bytes;
  int dead;
  char why[512]; /* why it died */
};

/* Ends the worker after a failed exchange and records why in s->why. */
static void die(sbx_matmul *s, int rc, int type, const uint8_t *msg, size_t len,
                const char *when) {
  kl_result *r = calloc(1, sizeof *r);
  if (rc == 0 && type == SBX_MSG_TRAP && len == 4) {
    int32_t nr;
    memcpy(&nr, msg, 4);
    sbx_reap(&s->w, 1000);
    snprintf(s->why, sizeof s->why,
             "%s: killed:seccomp:%s (the sandbox stopped the kernel at a "
             "forbidden system call)",
             when, sbx_syscall_name(nr));
  } else if (rc == SBX_TIMEOUT) {
    sbx_kill(&s->w);
    snprintf(s->why, sizeof s->why,
             "%s: timeout (no answer within %.0f s; worker killed)", when,
             s->deadline_ms / 1e3);
  } else {
    int st =
        rc == 0 || rc == SBX_EBAD ? sbx_kill(&s->w) : sbx_reap(&s->w, 1000);
    if (r) sbx_status_from_wait(st, "the kernel", r);
    snprintf(s->why, sizeof s->why, "%s: %s (%.300s)", when,
             r ? r->status : "ended", r ? r->error : "");
  }
  free(r);
  s->dead = 1;
}

/* One request and its DONE reply within deadline_ms (absolute): 0 with
 * *reply filled, or -1 with the server dead and s->why saying why (when
 * names the request). */
static int exchange(sbx_matmul *s, int type, const void *req, size_t len,
                    double deadline_ms, const char *when, sbx_mm_reply *reply) {
  int rtype = 0, rc = -1;
  uint8_t *msg = NULL;
  size_t rlen = 0;
  if (sbx_send(s->w.to, type, req, len, NULL, 0) == 0)
    rc = sbx_recv(s->w.from, &rtype, &msg, &rlen, sizeof *reply, deadline_ms);
  if (rc != 0 || rtype != SBX_MSG_MM_DONE || rlen != sizeof *reply) {
    die(s, rc, rtype, msg, rlen, when);
    free(msg);
    return -1;
  }
  memcpy(reply, msg, sizeof *reply);
  free(msg);
  reply->why[sizeof reply->why - 1] = 0;
  return 0;
}

/* Spawns a worker and loads s->load into it: 0, or a KL_ code with why. */
static int start_worker(sbx_matmul *s, char *why, size_t whylen) {
  s->dead = 0;
  if (sbx_spawn(&s->w, "matmul-cpu-emu", why, whylen) != 0 ||
      sbx_await_ready(&s->w, 30000, why, whylen) != 0)
    return KL_EENV;
  sbx_mm_reply reply;
  if (exchange(s, SBX_MSG_MM_LOAD, &s->load, sizeof s->load,
               sbx_now_ms() + 30000, "loading the kernel", &reply) != 0) {
    snprintf(why, whylen, "%s", s->why);
    return KL_EINPUT;
  }
  if (reply.rc != KL_OK) {
    snprintf(why, whylen, "%s", reply.why);
    return KL_EINPUT;
  }
  return KL_OK;
}

/* Ends the worker (EOF on its requests: it exits by itself) and drops the
 * mapping of its memfd. */
static void end_worker(sbx_matmul *s) {
  if (s->w.up) {
    close(s->w.to);
    s->w.to = -1;
    sbx_reap(&s->w, 1000);
  }
  if (s->map) munmap(s->map, s->map_bytes);
  s->map = NULL;
  s->map_bytes = 0;
}

/* CPU seconds (user + system) process pid has used; -1 when unknown. */
static double cpu_seconds(pid_t pid) {
  char path[64], buf[1024];
  snprintf(path, sizeof path, "/proc/%ld/stat", (long)pid);
  FILE *f = fopen(path, "r");
  if (!f) return -1;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = 0;
  char *p = strrchr(buf, ')'); /* the name may hold spaces and parens */
  unsigned long long ut, st;
  /* after the name: state (3), then fields 4..13, then utime, stime */
  if (!p ||
      sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu",
             &ut, &st) != 2)
    return -1;
  long hz = sysconf(_SC_CLK_TCK);
  return hz > 0 ? (double)(ut + st) / hz : -1;
}

/* The four canary bands around A, B and C (sbx_mm_layout): filled when
 * fill, else checked. Returns 1 when every band holds the canary. */
static int bands(float *map, const size_t off[3], size_t na, size_t nb,
                 size_t nc, int fill) {
  const size_t from[4] = {0, off[0] + na, off[1] + nb, off[2] + nc};
  int intact = 1;
  for (int b = 0; b < 4; b++)
    if (fill)
      kl_canary_fill(map + from[b]);
    else
      intact &= kl_canary_intact(map + from[b]);
  return intact;
}

int sbx_matmul_open(const char *so_path, int needs_fibers, int threads,
                    double deadline_s, sbx_matmul **out, char *why,
                    size_t whylen) {
  *out = NULL;
  sbx_matmul *s = calloc(1, sizeof *s);
  if (!s) {
    snprintf(why, whylen, "out of memory");
    return KL_EENV;
  }
  pthread_mutex_init(&s->mu, NULL);
  s->deadline_ms = (deadline_s > 0 ? deadline_s : 60) * 1e3;
  s->recycle_cpu = SBX_RUN_CPU_LIMIT_S / 2.0;
  snprintf(s->load.so_path, sizeof s->load.so_path, "%s", so_path);
  s->load.needs_fibers = needs_fibers;
  s->load.threads = threads;
  int rc = start_worker(s, why, whylen);
  if (rc != KL_OK) {
    sbx_matmul_close(s);
    return rc;
  }
  *out = s;
  return KL_OK;
}

void sbx_matmul_set_recycle(sbx_matmul *s, double cpu_s) {
  s->recycle_cpu = cpu_s;
}

int sbx_matmul_restarts(const sbx_matmul *s) {
  return s->restarts;
}

int sbx_matmul_run(sbx_matmul *s, const float *A, const float *B, float *C,
                   int M, int N, int K, char *why, size_t whylen) {
  pthread_mutex_lock(&s->mu);
  int ret = KL_EINPUT;
  if (s->dead) {
    snprintf(why, whylen, "%s", s->why);
    goto out;
  }
  if (s->w.up && cpu_seconds(s->w.pid) >= s->recycle_cpu) {
    end_worker(s); /* a fresh one, before the CPU limit ends this one */
    s->restarts++;
    ret = start_worker(s, why, whylen);
    if (ret != KL_OK) {
      snprintf(s->why, sizeof s->why, "restarting the worker: %s", why);
      s->dead = 1;
      if (s->w.up) sbx_kill(&s->w);
      goto out;
    }
    ret = KL_EINPUT;
  }
  size_t na = (size_t)M * K, nb = (size_t)K * N, nc = (size_t)M * N;
  size_t off[3];
  size_t total = sbx_mm_layout(M, N, K, off);
  size_t bytes = total * sizeof(float);
  if (bytes > s->map_bytes) { /* grow the memfd; the worker maps per call */
    if (s->map) munmap(s->map, s->map_bytes);
    s->map = NULL;
    s->map_bytes = 0;
    void *p = MAP_FAILED;
    if (ftruncate(s->w.outs, (off_t)bytes) == 0)
      p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, s->w.outs, 0);
    if (p == MAP_FAILED) {
      snprintf(why, whylen, "cannot map %zu bytes for a GEMM: %s", bytes,
               strerror(errno));
      ret = KL_EENV;
      goto out;
    }
    s->map = p;
    s->map_bytes = bytes;
  }
  bands(s->map, off, na, nb, nc, 1);
  memcpy(s->map + off[0], A, na * sizeof(float));
  memcpy(s->map + off[1], B, nb * sizeof(float));
  kl_poison(s->map + off[2], nc); /* written by the kernel, or visibly not */
  int32_t mnk[3] = {M, N, K};
  char when[64];
  snprintf(when, sizeof when, "at %dx%dx%d", M, N, K);
  sbx_mm_reply reply;
  if (exchange(s, SBX_MSG_MM_GO, mnk, sizeof mnk, sbx_now_ms() + s->deadline_ms,
               when, &reply) != 0) {
    snprintf(why, whylen, "%s", s->why);
    goto out;
  }
  if (reply.rc != KL_OK) {
    snprintf(why, whylen, "%s: %s", when, reply.why);
    goto out;
  }
  /* A write outside C, or into the inputs, is what the harness flags
   * canary_overwritten or input_mutated: this kernel is not to be trusted
   * with another GEMM, so the server ends as after a crash. */
  const char *bad = bands(s->map, off, na, nb, nc, 0)
                        ? NULL
                        : "wrote outside C (a canary band changed)";
  if (!bad && (memcmp(s->map + off[0], A, na * sizeof(float)) ||
               memcmp(s->map + off[1], B, nb * sizeof(float))))
    bad = "changed its input A or B";
  if (bad) {
    sbx_kill(&s->w);
    snprintf(s->why, sizeof s->why, "%s: the kernel %s", when, bad);
    s->dead = 1;
    snprintf(why, whylen, "%s", s->why);
    goto out;
  }
  memcpy(C, s->map + off[2], nc * sizeof(float));
  ret = KL_OK;
out:
  pthread_mutex_unlock(&s->mu);
  return ret;
}

void sbx_matmul_close(sbx_matmul *s) {
  if (!s) return;
  end_worker(s);
  pthread_mutex_destroy(&s->mu);
  free(s);
}
