/*
 * sandbox/worker.c — the worker side: `kernlab __worker MODE PPID`, started
 * by the supervisor with fork+exec (sbx_spawn), talking over the pipes on
 * descriptors 3 (in) and 4 (out).
 *
 * Every worker first makes sure it cannot outlive the lab (PR_SET_PDEATHSIG,
 * then a check that the parent is still the one that started it) and closes
 * every descriptor it did not ask for. Then, by mode:
 *
 *   compile       load NVRTC and compile a tiny kernel (NVRTC dlopens its
 *                 builtins lazily), confine with the `compile` profile, say
 *                 READY, then serve COMPILE requests until the pipe closes.
 *                 No cache access: the supervisor reads and writes the cache.
 *   run-cpu-emu   confine (`run-cpu-emu`), say READY, wait for one RUN job,
 *                 load the candidate (its static initialisers run confined),
 *                 stack `run-cpu-emu-loaded`, run with the outputs in the
 *                 memfd on descriptor 5 (a paced job's timed launches on
 *                 the supervisor's word: PACE, answered by PACED), reply,
 *                 exit. One job per process: after a candidate ran, the
 *                 process is its.
 *   matmul-cpu-emu  as run-cpu-emu, then one LOAD (the module) and GO
 *                 requests (one GEMM each, operands in the memfd) until the
 *                 pipe closes: --policy-matmul on the CPU (sandbox/matmul.c).
 *   run-gpu       CUDA initialised, confine (`run-gpu`, TSYNC), READY, one
 *                 RUN job with the cubin appended, reply, exit (below).
 *   host-compile  apply the `host-compile` limits and namespaces, then exec
 *                 the compiler command that follows `--`.
 */
#define _GNU_SOURCE
#include "sandbox/sandbox_internal.h"

#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <malloc.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <sched.h>
#include <seccomp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef SYS_close_range
#define SYS_close_range 436
#endif

static void die_with_parent(pid_t expected) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != expected) _exit(1); /* the lab is already gone */
}

static void close_other_fds(int keep_from) {
  if (syscall(SYS_close_range, (unsigned)keep_from, ~0u, 0) == 0) return;
  for (int fd = keep_from; fd < 1024; fd++)
    close(fd);
}

static const char warmup_src[] =
    "KL_LAUNCH(1, 1, 1, 1, 0);\n"
    "extern \"C\" __global__ void matmul(const float* A, const float* B, "
    "float* C, int M, int N, int K) { C[0] = A[0] * B[0]; }\n";

/* Puts the address space's peak and limit in front of an oom's message
 * (NVRTC's summary fills it; the front survives the cuts further on):
 * whether the candidate itself grew (a template bomb) or the worker started
 * near its limit is then plain from the message. */
static void note_address_space(int status_fd, char *why, size_t whylen) {
  struct rlimit rl;
  unsigned long long peak = sbx_vm_peak_bytes(status_fd);
  if (!peak || getrlimit(RLIMIT_AS, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY)
    return;
  char was[512];
  snprintf(was, sizeof was, "%s", why);
  snprintf(why, whylen,
           "the compile worker's address space reached %llu MiB of its %llu "
           "MiB limit | %.*s",
           peak >> 20, (unsigned long long)rl.rlim_cur >> 20,
           (int)(whylen > 200 ? whylen - 200 : 0), was);
}

static int compile_worker(void) {
  char why[600];
  sbx_enter_namespaces(); /* before NVRTC starts its threads */
  /* NVRTC 13 keeps a compile cache through the driver where one is
   * installed (a folder under $HOME): the lab's own cache is the one, and
   * the confined worker may write no file. NVRTC still loads libcuda and
   * calls cuInit with this set (seen on the H200 machine): the compile
   * profile's RLIMIT_AS counts from the peak after the warm-up for that. */
  setenv("CUDA_CACHE_DISABLE", "1", 1);
  if (kl_nvrtc_load(why, sizeof why) != KL_OK) {
    fprintf(stderr, "kernlab compile worker: %s\n", why);
    return 3;
  }
  kl_compiled warm;
  (void)kl_nvrtc_compile(warmup_src, sizeof warmup_src - 1, "sm_90", 0, &warm,
                         why, sizeof why);
  kl_compiled_free(&warm);
  /* Opened now: an oom's message says how far the address space got, and
   * the confined worker may not open /proc files. */
  int status_fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
  int confinement = sbx_confine(SBX_COMPILE, NULL, SBX_FD_OUT, why, sizeof why);
  if (confinement < 0) {
    fprintf(stderr, "kernlab compile worker: %s\n", why);
    return 3;
  }
  if (sbx_send_ready(SBX_FD_OUT, confinement) != 0) return 1;
  for (;;) {
    int type;
    uint8_t *msg;
    size_t len;
    int rc = sbx_recv(SBX_FD_IN, &type, &msg, &len, KL_MAX_SOURCE_BYTES + 4096,
                      1e18);
    if (rc != 0) return rc == SBX_EOF ? 0 : 1;
    const char *arch = (const char *)msg;
    const char *nul = memchr(msg, 0, len);
    if (type != SBX_MSG_COMPILE || !nul) {
      free(msg);
      return 1;
    }
    const char *src = nul + 1;
    size_t src_len = len - (size_t)(src - arch);
    kl_compiled c;
    sbx_compile_reply r;
    memset(&r, 0, sizeof r);
    r.rc = kl_nvrtc_compile(src, src_len, arch, 0, &c, r.why, sizeof r.why);
    if (r.rc == KL_EOOM) note_address_space(status_fd, r.why, sizeof r.why);
    memcpy(r.key, c.key, sizeof r.key);
    r.cubin_size = c.cubin_size;
    r.compile_ms = c.compile_ms;
    size_t loglen = c.log ? strlen(c.log) : 0;
    /* One frame: reply struct, cubin, log. */
    uint8_t *body = malloc(r.cubin_size + loglen + 1);
    if (body) {
      if (r.cubin_size) memcpy(body, c.cubin, r.cubin_size);
      if (loglen) memcpy(body + r.cubin_size, c.log, loglen);
    }
    int sent = body ? sbx_send(SBX_FD_OUT, SBX_MSG_COMPILED, &r, sizeof r, body,
                               r.cubin_size + loglen)
                    : -1;
    free(body);
    kl_compiled_free(&c);
    free(msg);
    if (sent != 0) return 1;
  }
}

static void stack_loaded_profile(void *ctx) {
  (void)ctx;
  char why[256];
  /* stdout (/dev/null: device printf) with a buffer of our own: glibc
   * allocates one on the first write and fstat()s the descriptor to size
   * it, through newfstatat, which the filter below traps */
  static char out_buf[BUFSIZ];
  setvbuf(stdout, out_buf, _IOFBF, sizeof out_buf);
  if (sbx_confine(SBX_RUN_CPU_EMU_LOADED, NULL, SBX_FD_OUT, why, sizeof why) <
      0)
    _exit(3); /* refusing to run unconfined */
}

/* A paced job's timed launches (kernels/pace.c): the supervisor says
 * which batch and of how many launches (PACE n k), the runner answers
 * each batch (PACED). Anything but a PACE frame on the pipe ends the
 * timing. */
static int await_pace(void *ctx, int *k) {
  (void)ctx;
  int type;
  uint8_t *msg;
  size_t len;
  if (sbx_recv(SBX_FD_IN, &type, &msg, &len, 2 * sizeof(int32_t), 1e18) != 0)
    return -1;
  int32_t v[2] = {-1, 0};
  if (type == SBX_MSG_PACE && len == sizeof v) memcpy(v, msg, sizeof v);
  free(msg);
  *k = v[1];
  return v[0] < 0 ? -1 : v[0];
}

static void answer_pace(void *ctx, int ok) {
  (void)ctx;
  int32_t v = ok;
  sbx_send(SBX_FD_OUT, SBX_MSG_PACED, &v, sizeof v, NULL, 0);
}

/* What an emulator worker does before it is confined: namespaces (while
 * still single-threaded), the C++ runtime every emulated module links, and
 * the emulator's threads and fiber stacks, since the filter lets no thread
 * start afterwards (it is synchronised to these). Returns how many threads
 * the emulator has. */
static int emu_worker_start(void) {
  sbx_enter_namespaces();
  dlopen("libstdc++.so.6", RTLD_NOW | RTLD_GLOBAL);
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  int pool_threads = kl_emu_pool_start(cores > 0 ? (int)cores : 1);
  kl_emu_prewarm(cores > 0 ? (int)cores : 1);
  return pool_threads;
}

/* Keeps big buffers on a heap that is already faulted in: a fresh process
 * would otherwise map (and fault) every input and output anew, on the
 * evaluation's critical path, which is what separated a worker's checks
 * from a warm process's (6 to 7 ms of an evaluation at the default
 * target; a first touch of a 4 KiB page cost 12 us on the two-core VM of
 * tests/bench/bench_sandbox). The touch must outlive the optimiser: a memset of
 * a block freed right after is a dead store, and GCC removed the one this used
 * to be (the heap stayed unfaulted). Huge pages where the kernel gives them on
 * request (transparent_hugepage "madvise"): one fault per 2 MiB. PREFAULT_BYTES
 * covers the checks at 512^3 (inputs, output and the rerun's scaled copies); a
 * larger target's launches take seconds, next to which its faults are lost. */
#define PREFAULT_BYTES ((size_t)8 << 20)
static void prefault_heap(void) {
  mallopt(M_MMAP_THRESHOLD, 256 << 20);
  mallopt(M_TRIM_THRESHOLD, 512 << 20);
  char *heap = malloc(PREFAULT_BYTES);
  if (!heap) return;
  uintptr_t huge = (uintptr_t)2 << 20,
            lo = ((uintptr_t)heap + huge - 1) & ~(huge - 1),
            hi = ((uintptr_t)heap + PREFAULT_BYTES) & ~(huge - 1);
  if (hi > lo) madvise((void *)lo, hi - lo, MADV_HUGEPAGE);
  for (size_t i = 0; i < PREFAULT_BYTES; i += 4096)
    ((volatile char *)heap)[i] = 0;
  free(heap);
}

static int run_worker(void) {
  /* Work that does not depend on the job happens before READY, while the
   * lab compiles the next candidate (sbx_limits.overlap_workers: while the
   * previous candidate still runs). */
  int pool_threads = emu_worker_start();
  prefault_heap();
  /* Confined before READY too: nothing in the filter depends on the job,
   * and the job then starts at once. */
  char why[256];
  int confinement =
      sbx_confine(SBX_RUN_CPU_EMU, NULL, SBX_FD_OUT, why, sizeof why);
  if (sbx_send_ready(SBX_FD_OUT, confinement) != 0) return 1;
  int type;
  uint8_t *msg;
  size_t len;
  if (sbx_recv(SBX_FD_IN, &type, &msg, &len, sizeof(kl_run_job), 1e18) != 0)
    return 1;
  if (type != SBX_MSG_RUN || len != sizeof(kl_run_job)) return 1;
  kl_run_job job;
  memcpy(&job, msg, sizeof job);
  free(msg);
  job.so_path[sizeof job.so_path - 1] = 0;
  if (job.n_shapes < 0 || job.n_shapes > KL_MAX_SHAPES) return 1;
  /* The filter lets no thread start: the job runs on the threads started
   * above (more than one per core would not run faster anyway). */
  if (job.threads > pool_threads) job.threads = pool_threads;
  if (job.threads < 1) job.threads = 1;
  size_t offs[KL_OUT_SLOTS];
  size_t n_outs = kl_run_output_layout(&job, offs);
  /* The outputs live in the memfd the supervisor sized for this job, a
   * paced job's timed buffers after them (populated at once: one fault
   * per page would cost more). */
  size_t n_map = n_outs + kl_pace_floats(&job);
  float *outs =
      mmap(NULL, sizeof(float) * (n_map ? n_map : 1), PROT_READ | PROT_WRITE,
           MAP_SHARED | MAP_POPULATE, SBX_FD_OUTS, 0);
  kl_run_report *rep = calloc(1, sizeof *rep);
  if (outs == MAP_FAILED || !rep) return 1;
  sbx_run_reply reply = {confinement, 0, n_outs};
  if (reply.confinement < 0) {
    snprintf(rep->why, sizeof rep->why, "sandbox: %.480s", why);
    rep->failed = 1;
  } else {
    kl_run_hooks hooks = {stack_loaded_profile, await_pace, answer_pace, NULL};
    kl_run_execute(&job, rep, outs, &hooks);
  }
  /* Reply: sbx_run_reply (with the outputs' checksum), kl_run_report. */
  reply.outs_crc = sbx_crc32c(0, outs, n_outs * sizeof(float));
  int rc =
      sbx_send(SBX_FD_OUT, SBX_MSG_RAN, &reply, sizeof reply, rep, sizeof *rep);
  /* The candidate's threads and state die with the process; exit without
   * running its destructors. */
  syscall(SYS_exit_group, rc == 0 ? 0 : 1);
  return 1;
}

/* ---- matmul-cpu-emu: one module, many GEMMs (sandbox/matmul.c) ---- */

static int mm_reply(int rc, const char *why) {
  sbx_mm_reply r;
  memset(&r, 0, sizeof r);
  r.rc = rc;
  snprintf(r.why, sizeof r.why, "%s", why ? why : "");
  return sbx_send(SBX_FD_OUT, SBX_MSG_MM_DONE, &r, sizeof r, NULL, 0);
}

static int matmul_worker(void) {
  int pool_threads = emu_worker_start();
  char why[320];
  int confinement =
      sbx_confine(SBX_RUN_CPU_EMU, NULL, SBX_FD_OUT, why, sizeof why);
  int confined = confinement >= 0;
  if (sbx_send_ready(SBX_FD_OUT, confinement) != 0) return 1;
  int type;
  uint8_t *msg;
  size_t len;
  if (sbx_recv(SBX_FD_IN, &type, &msg, &len, sizeof(sbx_mm_load), 1e18) != 0)
    return 1;
  if (type != SBX_MSG_MM_LOAD || len != sizeof(sbx_mm_load)) return 1;
  sbx_mm_load load;
  memcpy(&load, msg, sizeof load);
  free(msg);
  load.so_path[sizeof load.so_path - 1] = 0;
  if (!confined) return mm_reply(KL_EINPUT, why) ? 1 : 0;
  kl_emu_module *m = NULL;
  if (kl_emu_load(load.so_path, load.needs_fibers, stack_loaded_profile, NULL,
                  &m, why, sizeof why) != KL_OK)
    return mm_reply(KL_EINPUT, why) ? 1 : 0;
  if (kl_launch_validate(kl_emu_geometry(m), why, sizeof why) != KL_OK)
    return mm_reply(KL_EINPUT, why) ? 1 : 0;
  int threads = load.threads < 1              ? 1
                : load.threads > pool_threads ? pool_threads
                                              : load.threads;
  if (mm_reply(KL_OK, NULL) != 0) return 1;
  /* Requests until the pipe closes: A, B, C in the memfd, laid out for
   * this request's M, N, K by sbx_mm_layout (mapped per request: the
   * supervisor grows it and checks the canary bands after). */
  for (;;) {
    if (sbx_recv(SBX_FD_IN, &type, &msg, &len, 12, 1e18) != 0) break;
    int32_t mnk[3] = {0, 0, 0};
    if (type == SBX_MSG_MM_GO && len == sizeof mnk) memcpy(mnk, msg, len);
    free(msg);
    if (mnk[0] < 1 || mnk[1] < 1 || mnk[2] < 1) return 1;
    size_t off[3];
    size_t bytes = sbx_mm_layout(mnk[0], mnk[1], mnk[2], off) * sizeof(float);
    float *p =
        mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, SBX_FD_OUTS, 0);
    if (p == MAP_FAILED) return 1;
    int rc = kl_emu_run(m, p + off[0], p + off[1], p + off[2], mnk[0], mnk[1],
                        mnk[2], threads, why, sizeof why);
    munmap(p, bytes);
    if (mm_reply(rc == KL_OK ? KL_OK : KL_EINPUT, why) != 0) return 1;
  }
  /* The candidate's state dies with the process. */
  syscall(SYS_exit_group, 0);
  return 0;
}

/* ---- run-gpu ----
 *
 * CUDA first (driver, context, CUPTI, cuBLAS, flush buffer: kl_gpu_init
 * opens device files and starts driver threads), then the `run-gpu` filter
 * with TSYNC, then READY; one job (kl_run_job followed by the cubin in the
 * same RUN frame; no cubin: the cuBLAS baseline), one reply, exit. A CUDA
 * error leaves the context unusable, so the process never runs a second
 * job. If CUDA cannot start, the worker still says READY and answers the
 * job with the reason, so the lab can print it.
 *
 * KERNLAB_GPU_SECCOMP=record (for tests/gpu/check.sh on a device) replaces
 * the filter by a recording one: every syscall after init except ioctl is
 * reported to a listener thread (SCMP_ACT_NOTIFY) that counts it and lets it
 * continue (SECCOMP_USER_NOTIF_FLAG_CONTINUE, Linux 5.5+); the counts go to
 * stderr as "kernlab run-gpu seccomp-record: NAME COUNT" lines before the
 * reply. The worker is NOT confined in that mode, and says so. */

#define SBX_MAX_CUBIN_BYTES (64u << 20)
#define RECORD_MAX_NR 1024

static unsigned record_counts[RECORD_MAX_NR];
static int record_fd = -1;
static struct seccomp_notif *record_req;
static struct seccomp_notif_resp *record_resp;

/* The listener: only ioctl (allowed by the filter) and memory writes, so it
 * never waits on itself. It exists before the filter (creating a thread
 * after it would need the listener) and spins, without syscalls, until the
 * filter's descriptor is published. */
static int record_listening;

static void *record_listener(void *arg) {
  (void)arg;
  __atomic_store_n(&record_listening, 1, __ATOMIC_RELEASE);
  while (__atomic_load_n(&record_fd, __ATOMIC_ACQUIRE) < 0)
    __builtin_ia32_pause();
  for (;;) {
    memset(record_req, 0, sizeof *record_req);
    if (seccomp_notify_receive(record_fd, record_req) != 0) continue;
    int nr = record_req->data.nr;
    if (nr >= 0 && nr < RECORD_MAX_NR)
      __atomic_fetch_add(&record_counts[nr], 1, __ATOMIC_RELAXED);
    memset(record_resp, 0, sizeof *record_resp);
    record_resp->id = record_req->id;
    record_resp->flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE;
    seccomp_notify_respond(record_fd, record_resp);
  }
  return NULL;
}

static int record_start(char *why, size_t whylen) {
  scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_NOTIFY);
  if (!ctx) {
    snprintf(why, whylen, "seccomp_init(SCMP_ACT_NOTIFY) failed");
    return -1;
  }
  seccomp_attr_set(ctx, SCMP_FLTATR_CTL_TSYNC, 1);
  int rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(ioctl), 0);
  if (rc == 0 && seccomp_notify_alloc(&record_req, &record_resp) != 0) rc = -1;
  pthread_t th;
  if (rc == 0 && pthread_create(&th, NULL, record_listener, NULL) != 0) rc = -1;
  /* The listener's own start (rseq, set_robust_list, sigprocmask) must be
   * over before the filter lands: nobody else could answer it. */
  while (rc == 0 && !__atomic_load_n(&record_listening, __ATOMIC_ACQUIRE))
    sched_yield();
  /* From here until record_fd is published, this thread must make no
   * syscall either. */
  if (rc == 0) rc = seccomp_load(ctx);
  int fd = rc == 0 ? seccomp_notify_fd(ctx) : -1;
  if (fd >= 0) __atomic_store_n(&record_fd, fd, __ATOMIC_RELEASE);
  seccomp_release(ctx);
  if (rc != 0 || fd < 0) {
    /* The listener spins on; the worker only replies with the failure. */
    snprintf(why, whylen,
             "seccomp record mode unavailable (rc %d, fd %d; needs Linux 5.5+ "
             "and libseccomp 2.5)",
             rc, fd);
    return -1;
  }
  return 0;
}

static void record_print(void) {
  for (int nr = 0; nr < RECORD_MAX_NR; nr++) {
    unsigned n = __atomic_load_n(&record_counts[nr], __ATOMIC_RELAXED);
    if (n)
      fprintf(stderr, "kernlab run-gpu seccomp-record: %s %u\n",
              sbx_syscall_name(nr), n);
  }
  fprintf(stderr, "kernlab run-gpu seccomp-record: ioctl (allowed, not "
                  "counted)\n");
  fflush(stderr);
}

static int run_gpu_worker(void) {
  char why[512] = "", init_why[512] = "";
  kl_run_report *rep = calloc(1, sizeof *rep);
  if (!rep) return 1;
  /* Namespaces must come before CUDA starts its threads (unshare of a user
   * namespace fails in a threaded process), so sbx_confine's attempt after
   * kl_gpu_init never succeeds: the worker reports confinement 1. Entering
   * them first is opt-in until a device has shown that the driver opens
   * its /dev/nvidia* nodes inside a user namespace (KERNLAB_GPU_NAMESPACES=1;
   * tests/gpu/check.sh step 5 tries it). On the one device so far (an H200
   * VM, 2026-12-04) the kernel offered no user namespaces at all. */
  const char *ns = getenv("KERNLAB_GPU_NAMESPACES");
  if (ns && !strcmp(ns, "1")) sbx_enter_namespaces();
  int init_rc = kl_gpu_init(init_why, sizeof init_why);
  const char *mode = getenv("KERNLAB_GPU_SECCOMP");
  int record = mode && !strcmp(mode, "record");
  sbx_run_reply reply = {0, 0, 0};
  if (record) {
    if (record_start(why, sizeof why) != 0) {
      snprintf(rep->why, sizeof rep->why, "sandbox: %.480s", why);
      rep->failed = 1;
    } else {
      fprintf(stderr, "kernlab run-gpu: KERNLAB_GPU_SECCOMP=record: this "
                      "worker is NOT confined; recording its syscalls\n");
    }
  } else if (init_rc == KL_OK) {
    reply.confinement =
        sbx_confine(SBX_RUN_GPU, NULL, SBX_FD_OUT, why, sizeof why);
    if (reply.confinement < 0) {
      snprintf(rep->why, sizeof rep->why, "sandbox: %.480s", why);
      rep->failed = 1;
    }
  }
  if (sbx_send_ready(SBX_FD_OUT, reply.confinement) != 0) return 1;
  int type;
  uint8_t *msg;
  size_t len;
  if (sbx_recv(SBX_FD_IN, &type, &msg, &len,
               sizeof(kl_run_job) + SBX_MAX_CUBIN_BYTES, 1e18) != 0)
    return 1;
  if (type != SBX_MSG_RUN || len < sizeof(kl_run_job)) return 1;
  kl_run_job job;
  memcpy(&job, msg, sizeof job);
  const uint8_t *cubin = msg + sizeof job;
  size_t cubin_size = len - sizeof job;
  if (job.n_shapes < 0 || job.n_shapes > KL_MAX_SHAPES) return 1;
  size_t offs[KL_OUT_SLOTS];
  size_t n_outs = kl_run_output_layout(&job, offs);
  /* The outputs go into the memfd the supervisor sized for this job, as
   * run-cpu-emu's do: at 4096^2 they are hundreds of MB, which the reply
   * pipe would carry at about 1 GB/s. */
  float *outs =
      mmap(NULL, sizeof(float) * (n_outs ? n_outs : 1), PROT_READ | PROT_WRITE,
           MAP_SHARED | MAP_POPULATE, SBX_FD_OUTS, 0);
  if (outs == MAP_FAILED) return 1;
  reply.n_outs = n_outs;
  if (!rep->failed && init_rc != KL_OK) {
    snprintf(rep->why, sizeof rep->why, "gpu: %.480s", init_why);
    rep->failed = 1;
  } else if (!rep->failed) {
    kl_gpu_run_execute(&job, cubin_size ? cubin : NULL, cubin_size, rep, outs);
  }
  free(msg);
  if (record) record_print();
  reply.outs_crc = sbx_crc32c(0, outs, n_outs * sizeof(float));
  int rc =
      sbx_send(SBX_FD_OUT, SBX_MSG_RAN, &reply, sizeof reply, rep, sizeof *rep);
  /* The context may be poisoned by a fault: exit without tearing it down. */
  syscall(SYS_exit_group, rc == 0 ? 0 : 1);
  return 1;
}

static int host_compile_worker(int argc, char **argv) {
  int i = 0;
  while (i < argc && strcmp(argv[i], "--") != 0)
    i++;
  if (i + 1 >= argc) {
    fprintf(stderr, "kernlab host-compile worker: no command after --\n");
    return 2;
  }
  char why[PATH_MAX + 256], dir[PATH_MAX] = "";
  if (sbx_confine(SBX_HOST_COMPILE, NULL, -1, why, sizeof why) < 0) {
    fprintf(stderr, "kernlab host-compile worker: %s\n", why);
    return 3;
  }
  /* The compiler runs in its build folder (emu_build chdirs there and
   * points TMPDIR at it): that folder and the toolchain are all it may
   * open (a kernel without Landlock leaves the files as they were). */
  if (!getcwd(dir, sizeof dir) ||
      sbx_landlock_toolchain(dir, argv[i + 1], why, sizeof why) < 0) {
    fprintf(stderr, "kernlab host-compile worker: %s\n",
            dir[0] ? why : "cannot read the build folder's name");
    return 3;
  }
  execvp(argv[i + 1], argv + i + 1);
  fprintf(stderr, "kernlab host-compile worker: cannot run %s: %s\n",
          argv[i + 1], strerror(errno));
  return 127;
}

int sbx_worker_main(int argc, char **argv) {
  /* argv: __worker MODE PPID [-- command...] */
  if (argc < 3) {
    fprintf(stderr, "kernlab __worker: internal command, started by the lab\n");
    return 2;
  }
  const char *mode = argv[1];
  die_with_parent((pid_t)atol(argv[2]));
  if (!strcmp(mode, "host-compile")) {
    /* stdout/stderr go to the compile log; nothing else is inherited. */
    close_other_fds(3);
    return host_compile_worker(argc - 3, argv + 3);
  }
  int has_memfd = !strcmp(mode, "run-cpu-emu") ||
                  !strcmp(mode, "matmul-cpu-emu") || !strcmp(mode, "run-gpu");
  close_other_fds(has_memfd ? SBX_FD_OUTS + 1 : SBX_FD_OUT + 1);
  signal(SIGPIPE, SIG_IGN);
  if (!strcmp(mode, "compile")) return compile_worker();
  if (!strcmp(mode, "run-cpu-emu")) return run_worker();
  if (!strcmp(mode, "run-gpu")) return run_gpu_worker();
  if (!strcmp(mode, "matmul-cpu-emu")) return matmul_worker();
  fprintf(stderr, "kernlab __worker: unknown mode '%s'\n", mode);
  return 2;
}
