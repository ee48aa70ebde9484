/*
 * tests/unit/test_policy_cuda_arena.c — the policy runtime's memory arena
 * (policy/cuda/pcuda_arena.c) on the emulator (unit) and on a device
 * (gpu, --device):
 *   - random allocations and frees: every buffer 256-byte aligned, none
 *     overlapping another (each holds its own pattern, uploaded and read
 *     back), the statistics adding up, everything free at the end;
 *   - a freed buffer's space is handed out again without a backend call;
 *   - a chunk with nothing in it goes back to the backend when a larger
 *     request finds no room;
 *   - a training loop whose T changes every step, and pcuda_generate run
 *     twice, make no backend allocation once the sizes have been seen;
 *   - PCUDA_ARENA=off: one backend allocation and free per buffer;
 *   - pcuda_free of something that is no live buffer is a recorded error;
 *   - pcuda_model_batch_bytes, what `kernlab run` checks a campaign's
 *     update against, is what a forward and backward of that batch take
 *     from the arena (fp32 and bf16, every suite, and a larger B), and
 *     pcuda_mem_room counts the arena's unused part;
 *   - on the emulator under AddressSanitizer, a write one byte past a
 *     buffer's size (inside its 256-byte rounding) is caught, and one at
 *     its last byte is not.
 */
#define _GNU_SOURCE
#include "kltest.h"
#include "pcuda_testutil.h"

#include <stdint.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static const char *prog = "test_policy_cuda_arena";

/* A context of the same kind as the one under test, opened anew. */
static pcuda_ctx *open_like(const char *backend) {
  char why[256];
  pcuda_ctx *ctx = NULL;
  int rc = !strcmp(backend, "cpu-emu")
               ? pcuda_emu_open(&ctx, 0, why, sizeof why)
               : pcuda_device_open(&ctx, PCUDA_GEMM_AUTO, why, sizeof why);
  CHECK(rc == PL_OK, "%s: opening a second context: %s", backend, why);
  return rc == PL_OK ? ctx : NULL;
}

/* ---- random allocations ------------------------------------------------ */

#define LIVE 24

typedef struct live_buf {
  uint8_t *dev;
  size_t bytes;
  uint8_t seed;
} live_buf;

static size_t random_size(void) {
  switch (pt_rnd() % 4) {
  case 0:
    return 1 + pt_rnd() % 300; /* below one block */
  case 1:
    return 1 + pt_rnd() % 20000; /* tens of KiB */
  case 2:
    return 1 + pt_rnd() % 300000; /* hundreds of KiB */
  default:
    return (size_t)(1 + pt_rnd() % 3) << 19; /* 0.5 .. 1.5 MiB */
  }
}

/* Uploads buffer b's pattern: byte i is seed + i * 7 (mod 256). */
static void fill(pcuda_ctx *ctx, const live_buf *b, uint8_t *host) {
  for (size_t i = 0; i < b->bytes; i++)
    host[i] = (uint8_t)(b->seed + i * 7);
  pcuda_upload(ctx, b->dev, host, b->bytes);
}

/* 1 when buffer b still holds its pattern. */
static int intact(pcuda_ctx *ctx, const live_buf *b, uint8_t *host) {
  if (pcuda_download(ctx, host, b->dev, b->bytes) != PL_OK) return 0;
  for (size_t i = 0; i < b->bytes; i++)
    if (host[i] != (uint8_t)(b->seed + i * 7)) return 0;
  return 1;
}

static void check_random(pcuda_ctx *ctx, const char *backend) {
  live_buf live[LIVE] = {{0}};
  uint8_t *host = malloc((size_t)3 << 19);
  pcuda_mem_stats st0, st;
  pcuda_mem_stats_get(ctx, &st0);
  size_t max_live = 0;
  int bad_align = 0, broken = 0;
  for (int op = 0; op < 400; op++) {
    live_buf *b = &live[pt_rnd() % LIVE];
    if (b->dev) {
      broken += !intact(ctx, b, host);
      pcuda_free(ctx, b->dev);
      b->dev = NULL;
      continue;
    }
    b->bytes = random_size();
    b->seed = (uint8_t)op;
    b->dev = pcuda_alloc(ctx, b->bytes);
    if (!b->dev) break;
    bad_align += ((uintptr_t)b->dev % 256) != 0;
    fill(ctx, b, host);
    size_t sum = 0;
    int n = 0;
    for (int i = 0; i < LIVE; i++)
      if (live[i].dev) sum += (live[i].bytes + 255) / 256 * 256, n++;
    pcuda_mem_stats_get(ctx, &st);
    /* in_use counts each buffer rounded to 256, plus at most a red zone */
    CHECK(st.in_use - st0.in_use >= sum &&
              st.in_use - st0.in_use <= sum + (size_t)n * 256,
          "%s: random: %zu bytes in use for %d buffers of %zu rounded", backend,
          st.in_use - st0.in_use, n, sum);
    if (sum > max_live) max_live = sum;
  }
  CHECK(!bad_align, "%s: random: %d buffers not 256-byte aligned", backend,
        bad_align);
  for (int i = 0; i < LIVE; i++)
    if (live[i].dev) {
      broken += !intact(ctx, &live[i], host);
      pcuda_free(ctx, live[i].dev);
    }
  CHECK(!broken, "%s: random: %d buffers lost their contents (overlap)",
        backend, broken);
  pcuda_mem_stats_get(ctx, &st);
  CHECK(st.in_use == st0.in_use,
        "%s: random: %zu bytes in use after all "
        "were freed (%zu before)",
        backend, st.in_use, st0.in_use);
  CHECK(st.peak >= max_live && st.reserved >= st.peak - st0.in_use,
        "%s: random: peak %zu, reserved %zu, the most live %zu", backend,
        st.peak, st.reserved, max_live);
  CHECK(st.arena == 1, "%s: the arena is off without PCUDA_ARENA", backend);
  char why[256];
  CHECK(pcuda_status(ctx, why, sizeof why) == PL_OK, "%s: random: %s", backend,
        why);
  free(host);
}

/* ---- reuse and release ------------------------------------------------- */

static void check_reuse(pcuda_ctx *ctx, const char *backend) {
  pcuda_mem_stats a, b;
  void *p = pcuda_alloc(ctx, 100000);
  pcuda_free(ctx, p);
  pcuda_mem_stats_get(ctx, &a);
  void *q = pcuda_alloc(ctx, 100000);
  pcuda_mem_stats_get(ctx, &b);
  CHECK(q != NULL && b.backend_allocs == a.backend_allocs,
        "%s: reuse: a freed buffer's size again took %lu backend "
        "allocations",
        backend, b.backend_allocs - a.backend_allocs);
  pcuda_free(ctx, q);
}

/* On the emulator a buffer handed out holds 0xff bytes (NaN floats), a
 * reused one too, whatever was written into it before: a kernel that
 * reads what nothing wrote fails there as it could on a device. */
static void check_garbage(pcuda_ctx *ctx) {
  enum { N = 3000 };
  static uint8_t host[N];
  for (int round = 0; round < 2; round++) {
    void *p = pcuda_alloc(ctx, N);
    if (!p) {
      CHECK(0, "garbage: alloc failed");
      return;
    }
    pcuda_download(ctx, host, p, N);
    int bad = 0;
    for (int i = 0; i < N; i++)
      bad += host[i] != 0xff;
    CHECK(bad == 0, "garbage: round %d: %d of %d fresh bytes are not 0xff",
          round, bad, N);
    memset(host, 0, N);
    pcuda_upload(ctx, p, host, N); /* zeros, for the next round to reuse */
    pcuda_free(ctx, p);
  }
}

/* Larger than any chunk_min (64 MiB on a device), so each is its own chunk:
 * the second finds no room, and the first's chunk, now empty, goes back. */
static void check_release(const char *backend) {
  pcuda_ctx *ctx = open_like(backend);
  if (!ctx) return;
  pcuda_mem_stats st;
  void *p = pcuda_alloc(ctx, (size_t)96 << 20);
  pcuda_free(ctx, p);
  void *q = pcuda_alloc(ctx, (size_t)160 << 20);
  pcuda_mem_stats_get(ctx, &st);
  CHECK(p && q && st.backend_allocs == 2 && st.backend_frees == 1 &&
            st.chunks == 1 && st.reserved < ((size_t)161 << 20),
        "%s: release: %lu chunks taken, %lu given back, %d held (%zu "
        "bytes); expected 2, 1, 1 (160 MiB)",
        backend, st.backend_allocs, st.backend_frees, st.chunks, st.reserved);
  pcuda_free(ctx, q);
  pcuda_close(ctx);
}

/* ---- the model: no backend allocation once the sizes are known ---------- */

static void check_steady(pcuda_ctx *ctx, const char *backend) {
  const pt_suite *s = &pt_suites[0];
  char label[96], why[256];
  snprintf(label, sizeof label, "%s/steady", backend);
  pl_model m;
  pcuda_model dm;
  if (pt_make_model(&m, s, 99, label) != PL_OK) return;
  if (pt_pcuda_model_init(&dm, ctx, &m, PCUDA_DTYPE_BF16, label) != PL_OK)
    return;
  pl_adamw_config ac = pl_adamw_defaults();
  pl_adamw opt;
  pcuda_adamw dopt;
  pt_adamw_init(&opt, &dopt, &m, &dm, &ac, label);
  static const int Ts[] = {3, 9, 5, 8, 2, 7};
  int B = 2, nT = (int)(sizeof Ts / sizeof Ts[0]);
  int32_t tokens[2 * 9], targets[2 * 9];
  pt_make_batch(tokens, targets, 2 * 9, s->cfg.vocab);
  pcuda_mem_stats before, after;
  for (int pass = 0; pass < 3; pass++) {
    if (pass == 1) pcuda_mem_stats_get(ctx, &before);
    for (int i = 0; i < nT; i++) {
      float loss = pcuda_model_forward(&dm, tokens, targets, B, Ts[i]);
      CHECK(isfinite(loss), "%s: T %d: loss %g", label, Ts[i], loss);
      pcuda_model_zero_grad(&dm);
      pcuda_model_backward(&dm);
      pcuda_adamw_step(&dopt, &dm);
    }
  }
  pcuda_mem_stats_get(ctx, &after);
  CHECK(after.backend_allocs == before.backend_allocs,
        "%s: training with T changing every step took %lu more backend "
        "allocations after the first pass",
        label, after.backend_allocs - before.backend_allocs);
  /* sampling: the KV cache, its scratch and the sampler, twice */
  pl_sampling sp = pl_sampling_default();
  pl_generation gen[2];
  int32_t prompt[3] = {1, 2, 3};
  for (int g = 0; g < 2; g++) {
    if (g == 1) pcuda_mem_stats_get(ctx, &before);
    CHECK(pcuda_generate(&dm, prompt, 3, 4, 5, -1, &sp, 7, &gen[g], why,
                         sizeof why) == PL_OK,
          "%s: pcuda_generate: %s", label, why);
  }
  pcuda_mem_stats_get(ctx, &after);
  CHECK(after.backend_allocs == before.backend_allocs,
        "%s: a second pcuda_generate of the same size took %lu backend "
        "allocations",
        label, after.backend_allocs - before.backend_allocs);
  CHECK(!memcmp(gen[0].lengths, gen[1].lengths, 4 * sizeof(int32_t)),
        "%s: the same seed gave other lengths", label);
  pl_generation_free(&gen[0]);
  pl_generation_free(&gen[1]);
  CHECK(pcuda_status(ctx, why, sizeof why) == PL_OK, "%s: %s", label, why);
  pl_adamw_free(&opt);
  pcuda_adamw_free(&dopt);
  pcuda_model_free(&dm);
  pl_model_free(&m);
}

/* ---- the update's memory, as estimated before a run --------------------- */

static void check_batch_bytes(const char *backend) {
  for (int i = 0; i < PT_NUM_SUITES; i++)
    for (int dtype = PCUDA_DTYPE_FP32; dtype <= PCUDA_DTYPE_BF16; dtype++) {
      const pt_suite *s = &pt_suites[i];
      char label[96], why[256];
      snprintf(label, sizeof label, "%s/batch_bytes/%s/%s", backend, s->name,
               pcuda_dtype_name(dtype));
      pcuda_ctx *ctx = open_like(backend);
      pl_model m;
      pcuda_model dm;
      if (!ctx) return;
      if (pt_make_model(&m, s, 7, label) != PL_OK) return;
      if (pt_pcuda_model_init(&dm, ctx, &m, dtype, label) != PL_OK) return;
      /* the suite's batch, then a larger one that makes the buffers grow */
      const int Bs[2] = {s->B, 2 * s->B + 1};
      size_t n = (size_t)Bs[1] * s->T;
      int32_t *tokens = malloc(n * sizeof *tokens);
      int32_t *targets = malloc(n * sizeof *targets);
      pt_make_batch(tokens, targets, (int)n, s->cfg.vocab);
      pcuda_mem_stats before, after;
      pcuda_mem_stats_get(ctx, &before);
      for (int k = 0; k < 2; k++) {
        float loss = pcuda_model_forward(&dm, tokens, targets, Bs[k], s->T);
        pcuda_model_zero_grad(&dm);
        int rc = pcuda_model_backward(&dm);
        pcuda_mem_stats_get(ctx, &after);
        double est = pcuda_model_batch_bytes(&s->cfg, dtype, Bs[k], s->T);
        double got = (double)(after.in_use - before.in_use);
        /* each buffer rounds up to 256 bytes and has a red zone after it */
        CHECK(isfinite(loss) && rc == PL_OK && got >= est &&
                  got <= est + 4 * 512,
              "%s: B %d: a forward and backward took %.0f bytes, estimated "
              "%.0f",
              label, Bs[k], got, est);
      }
      double room = 0;
      CHECK(pcuda_mem_room(ctx, &room, why, sizeof why) == PL_OK &&
                room >= (double)(after.reserved - after.in_use) && room > 0,
            "%s: room %g with %zu bytes held unused: %s", label, room,
            after.reserved - after.in_use, why);
      free(tokens);
      free(targets);
      pcuda_model_free(&dm);
      pl_model_free(&m);
      pcuda_close(ctx);
    }
}

/* ---- PCUDA_ARENA=off, bad frees ---------------------------------------- */

static void check_passthrough(const char *backend) {
  setenv("PCUDA_ARENA", "off", 1);
  pcuda_ctx *ctx = open_like(backend);
  unsetenv("PCUDA_ARENA");
  if (!ctx) return;
  void *p[5];
  for (int i = 0; i < 5; i++)
    p[i] = pcuda_alloc(ctx, 1000 * (size_t)(i + 1));
  pcuda_mem_stats st;
  pcuda_mem_stats_get(ctx, &st);
  CHECK(st.arena == 0 && st.backend_allocs == 5 && st.chunks == 5,
        "%s: PCUDA_ARENA=off: arena %d, %lu backend allocations, %d chunks "
        "for 5 buffers",
        backend, st.arena, st.backend_allocs, st.chunks);
  for (int i = 0; i < 5; i++)
    pcuda_free(ctx, p[i]);
  pcuda_mem_stats_get(ctx, &st);
  CHECK(st.backend_frees == 5 && st.chunks == 0 && st.reserved == 0,
        "%s: PCUDA_ARENA=off: %lu backend frees, %d chunks, %zu bytes held "
        "after 5 frees",
        backend, st.backend_frees, st.chunks, st.reserved);
  pcuda_close(ctx);
}

static void check_bad_free(const char *backend) {
  pcuda_ctx *ctx = open_like(backend);
  if (!ctx) return;
  char why[256] = "";
  uint8_t *p = pcuda_alloc(ctx, 4096);
  pcuda_free(ctx, p + 256);
  CHECK(pcuda_status(ctx, why, sizeof why) == PL_EENV &&
            strstr(why, "not a live buffer"),
        "%s: freeing the inside of a buffer: status says \"%s\"", backend, why);
  pcuda_close(ctx);
  ctx = open_like(backend);
  if (!ctx) return;
  p = pcuda_alloc(ctx, 4096);
  pcuda_free(ctx, p);
  pcuda_free(ctx, p);
  CHECK(pcuda_status(ctx, why, sizeof why) == PL_EENV &&
            strstr(why, "not a live buffer"),
        "%s: a double free: status says \"%s\"", backend, why);
  pcuda_close(ctx);
}

/* ---- AddressSanitizer sees overruns (emulator) ------------------------- */

#if defined(__SANITIZE_ADDRESS__)
/* Writes byte `at` of a fresh 1000-byte buffer in a child; returns its exit
 * status, with the start of what it printed in out. */
static int poke(int at, char *out, size_t outlen) {
  int fds[2];
  if (pipe(fds) != 0) return -1;
  pid_t pid = fork();
  if (pid == 0) {
    dup2(fds[1], 2);
    close(fds[0]);
    char why[256];
    pcuda_ctx *ctx = NULL;
    if (pcuda_emu_open(&ctx, 1, why, sizeof why) != PL_OK) _exit(3);
    volatile uint8_t *p = pcuda_alloc(ctx, 1000);
    p[at] = 1; /* "device" memory is host memory on the emulator */
    _exit(0);
  }
  close(fds[1]);
  size_t n = 0;
  ssize_t r;
  while (n + 1 < outlen && (r = read(fds[0], out + n, outlen - 1 - n)) > 0)
    n += (size_t)r;
  out[n] = 0;
  char sink[4096];
  while (read(fds[0], sink, sizeof sink) > 0) {
  }
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  return status;
}

#endif

static void check_asan(void) {
#if defined(__SANITIZE_ADDRESS__)
  char out[4096];
  int status = poke(999, out, sizeof out);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0,
        "asan: writing a buffer's last byte failed (status %d): %.300s", status,
        out);
  status = poke(1000, out, sizeof out);
  CHECK(!(WIFEXITED(status) && WEXITSTATUS(status) == 0) &&
            strstr(out, "use-after-poison"),
        "asan: writing one byte past a buffer went unnoticed (status %d): "
        "%.300s",
        status, out);
  printf("%s: asan: an overrun past a buffer is caught\n", prog);
#else
  printf("%s: asan: not an ASan build, the overrun check is skipped\n", prog);
#endif
}

/* ---- main ---------------------------------------------------------------- */

static void run_all(pcuda_ctx *ctx, const char *backend) {
  if (strcmp(backend, "cpu-emu") && strcmp(backend, "device")) return;
  check_random(ctx, backend);
  check_reuse(ctx, backend);
  check_steady(ctx, backend);
  check_release(backend);
  check_batch_bytes(backend);
  check_passthrough(backend);
  check_bad_free(backend);
  if (!strcmp(backend, "cpu-emu")) {
    check_garbage(ctx);
    check_asan();
  }
  pcuda_mem_stats st;
  pcuda_mem_stats_get(ctx, &st);
  printf("%s: %s: %lu buffers from %lu backend allocations, peak %.1f MiB, "
         "%.1f MiB held in %d chunks\n",
         prog, backend, st.allocs, st.backend_allocs, st.peak / 1048576.0,
         st.reserved / 1048576.0, st.chunks);
}

static void report(void) {}

int main(int argc, char **argv) {
  static const pt_program p = {"test_policy_cuda_arena", run_all, report, NULL};
  return pt_main(argc, argv, &p);
}
