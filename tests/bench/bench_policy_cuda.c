/*
 * tests/bench/bench_policy_cuda.c — how fast does the policy train and
 * sample on a device, through its own CUDA runtime (policy/cuda/pcuda.h)?
 *
 * One model, measured four ways in the same run, with the same weights:
 *   cpu      the C model of policy/ (OpenBLAS, --threads, default every
 *            core), what --policy-device cpu runs;
 *   pcuda    the policy's CUDA runtime on device 0, GEMMs through cuBLAS
 *            (fp32, no TF32), what --policy-device gpu runs;
 *   kernel   the same with every GEMM through a candidate kernel (default
 *            kernels/seeds/07_warptile.cu, --matmul FILE.cu) compiled by
 *            NVRTC and installed with pcuda_device_load_matmul, what
 *            --policy-matmul runs (the packing of transposed operands
 *            included);
 *   torch    the same model in PyTorch on the device
 *            (tests/bench/bench_policy_torch.py --device cuda: float32,
 *            TF32 off, its own KV-cache sampler), run with --python
 *            (default python3, the device image's).
 * Training: tokens/s of a step (zero grad, forward, backward, AdamW with
 * clipping) on a fixed random (B,T) batch, the median of --steps timed
 * steps after one warm-up, every step ended by a synchronisation.
 * Sampling: G = B rows of 256 new tokens after a 64-token prompt, plain
 * T = 1 sampling, no end token, KV cache (pl_generate, pcuda_generate),
 * after an untimed short run. Lines with the ratios:
 *   training: pcuda N tok/s vs cpu M tok/s: ratio Rx
 *   sampling: pcuda N tok/s vs cpu M tok/s: ratio Rx
 *   training: pcuda N tok/s vs torch (cuda) M tok/s: ratio Rx
 *   sampling: pcuda N tok/s vs torch (cuda) M tok/s: ratio Rx
 *   training: kernel 07_warptile.cu N tok/s vs pcuda (default GEMM) M
 *             tok/s: ratio Rx   (the default GEMM: cuBLAS, pcuda_describe)
 *   sampling: the same
 *   training: kernel 07_warptile.cu N tok/s vs cpu M tok/s: ratio Rx
 *   training: pcuda bf16 N tok/s vs pcuda fp32 M tok/s: ratio Rx
 *   sampling: the same
 *   generate churn: pcuda arena N calls/s vs pcuda PCUDA_ARENA=off M
 *             calls/s: ratio Rx
 * (bf16: pcuda_model_init_dtype PCUDA_DTYPE_BF16, bf16 GEMM operands with
 * fp32 master weights, what --policy-dtype bf16 runs; its first loss is
 * within bf16's error of the others', not equal; generate churn: 20 short
 * pcuda_generate calls, as a GRPO run makes one per group, the memory
 * arena against a cuMemAlloc / cuMemFree per buffer, each on its own
 * context), plus the first losses of each path (they train the same model:
 * cpu, pcuda and kernel agree to fp32 rounding), the arena's account, and,
 * without a ratio, where a decode step's time goes (the cached forward's
 * microseconds and launches per step, the sampler's).
 *
 * A benchmark, not a test: without a device (or a build without the
 * policy's fatbin) it prints that it is skipped and exits 0; without
 * NVRTC it skips the kernel lines, without torch on the device the torch
 * lines, saying why. Default model: bench_policy's (vocab 2048, d 256, 4
 * layers, 4 heads, d_ff 672, 3.6M parameters) at B=8, T=256.
 *
 * --emu is a dry run of this program on a machine without a device: the
 * pcuda lines run on the CPU emulator backend (the kernel built by the
 * host compiler, kl_emu_build, behind pcuda_set_matmul) and torch on the
 * CPU. Its numbers are emulator speed, never device speed; it exists to
 * test the bench's own code (use a tiny model: --vocab 128 --d 32 --layers
 * 1 --B 2 --T 16 --steps 1).
 *
 * usage: bench_policy_cuda [--vocab V] [--d C] [--layers L] [--heads NH]
 *                          [--B B] [--T T] [--steps N] [--threads N]
 *                          [--matmul FILE.cu] [--python PY] [--no-torch]
 *                          [--emu] [SOURCE_DIR]
 */
#include "bench_util.h"
#include "kernels/kernels.h"
#include "policy/cuda/pcuda.h"
#include "policy/policy.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PROMPT_LEN 64
#define NEW_TOKENS 256

typedef struct speed {
  double train_tps, sample_tps; /* 0: not measured */
  float first_loss;
} speed;

/* Training tokens/s, the median of `steps` after a warm-up; ctx NULL: the
 * CPU model m, else its twin on ctx in dtype (PCUDA_DTYPE_*). */
static void train(pl_model *m, pcuda_ctx *ctx, int dtype, const int32_t *x,
                  const int32_t *y, int B, int T, int steps, speed *out) {
  char why[256];
  pl_adamw_config ac = pl_adamw_defaults();
  pl_adamw opt;
  pcuda_model dm;
  pcuda_adamw dopt;
  double *t = malloc(sizeof(double) * (size_t)steps);
  if (!ctx) {
    pl_adamw_init(&opt, m, &ac, why, sizeof why);
  } else if (pcuda_model_init_dtype(&dm, ctx, m, dtype, why, sizeof why) !=
                 PL_OK ||
             pcuda_adamw_init(&dopt, &dm, &ac, why, sizeof why) != PL_OK) {
    fprintf(stderr, "bench_policy_cuda: %s\n", why);
    free(t);
    return;
  }
  for (int i = -1; i < steps; i++) {
    double t0 = bench_now_s();
    float loss;
    if (!ctx) {
      pl_model_zero_grad(m);
      loss = pl_model_forward(m, x, y, B, T);
      pl_model_backward(m);
      pl_adamw_step(&opt, m);
    } else {
      pcuda_model_zero_grad(&dm);
      loss = pcuda_model_forward(&dm, x, y, B, T);
      pcuda_model_backward(&dm);
      pcuda_adamw_step(&dopt, &dm);
      pcuda_status(ctx, NULL, 0);
    }
    if (i < 0) out->first_loss = loss;
    if (i >= 0) t[i] = bench_now_s() - t0;
  }
  if (ctx && pcuda_status(ctx, why, sizeof why) != PL_OK) {
    fprintf(stderr, "bench_policy_cuda: training on the device: %s\n", why);
  } else {
    out->train_tps = (double)B * T / bench_median(t, steps);
  }
  if (!ctx) {
    pl_adamw_free(&opt);
  } else {
    pcuda_adamw_free(&dopt);
    pcuda_model_free(&dm);
  }
  free(t);
}

/* Sampling tokens/s of G rows x NEW_TOKENS after the prompt, after an
 * untimed run of 8 tokens. */
static void sample(const pl_model *m, pcuda_ctx *ctx, int dtype,
                   const int32_t *prompt, int G, speed *out) {
  char why[256];
  pcuda_model dm;
  if (ctx &&
      pcuda_model_init_dtype(&dm, ctx, m, dtype, why, sizeof why) != PL_OK) {
    fprintf(stderr, "bench_policy_cuda: %s\n", why);
    return;
  }
  pl_sampling sp = pl_sampling_default();
  double dt = 0;
  long n = 0;
  int rc = PL_OK;
  for (int pass = 0; pass < 2 && rc == PL_OK; pass++) {
    int new_tokens = pass ? NEW_TOKENS : 8;
    pl_generation gen;
    double t0 = bench_now_s();
    rc = ctx ? pcuda_generate(&dm, prompt, PROMPT_LEN, G, new_tokens, -1, &sp,
                              1, &gen, why, sizeof why)
             : pl_generate(m, prompt, PROMPT_LEN, G, new_tokens, -1, &sp, 1,
                           &gen, why, sizeof why);
    dt = bench_now_s() - t0;
    if (rc != PL_OK) break;
    n = 0;
    for (int g = 0; g < G; g++)
      n += gen.lengths[g];
    pl_generation_free(&gen);
  }
  if (rc == PL_OK)
    out->sample_tps = n / dt;
  else
    fprintf(stderr, "bench_policy_cuda: sampling: %s\n", why);
  if (ctx) pcuda_model_free(&dm);
}

/* Where a decode step's time goes, to choose the next optimisation (a
 * CUDA graph if launches dominate, faster kernels if not): after a
 * prompt_len prefill copied to G rows, DECODE_STEPS steps of the cached
 * forward alone (G rows, one token each, synchronised per step) and as
 * many sampler runs on their logits; prints microseconds per step and
 * launches per step. Run after PROMPT_LEN tokens and, on a device, after
 * LONG_PROMPT, where the cached attention splits each row's positions
 * over several blocks (one more launch per layer, to merge them). */
#define DECODE_STEPS 32
#define LONG_PROMPT 1536
static void decode_breakdown(const pl_model *m, pcuda_ctx *ctx,
                             const int32_t *prompt, int prompt_len, int G) {
  char why[256];
  pcuda_model dm;
  pcuda_kv_cache kv;
  if (pcuda_model_init(&dm, ctx, m, why, sizeof why) != PL_OK) {
    fprintf(stderr, "bench_policy_cuda: decode: %s\n", why);
    return;
  }
  int max_seq = prompt_len + DECODE_STEPS;
  if (max_seq > m->cfg.max_seq ||
      pcuda_kv_cache_init(&kv, ctx, &m->cfg, G, max_seq, why, sizeof why) !=
          PL_OK) {
    if (max_seq > m->cfg.max_seq)
      fprintf(stderr,
              "bench_policy_cuda: decode: the model's max_seq is %d, "
              "expected at least %d\n",
              m->cfg.max_seq, max_seq);
    else
      fprintf(stderr, "bench_policy_cuda: decode: %s\n", why);
    pcuda_model_free(&dm);
    return;
  }
  int32_t *feed = calloc((size_t)G, sizeof *feed);
  pl_rng *rngs = malloc((size_t)G * sizeof *rngs);
  pl_sample_out *so = malloc((size_t)G * sizeof *so);
  int rc = pcuda_forward_cached(&dm, &kv, prompt, NULL, 1, prompt_len, 0, why,
                                sizeof why);
  for (int g = 1; g < G; g++)
    pcuda_kv_cache_copy_prefix(&kv, 0, g, prompt_len);
  double t_fwd = 0, t_smp = 0;
  unsigned long l_fwd = 0, l_smp = 0;
  pl_sampling sp = pl_sampling_default();
  for (int g = 0; g < G; g++)
    pl_rng_seed_stream(&rngs[g], 3, (uint64_t)g);
  for (int i = 0; i < DECODE_STEPS && rc == PL_OK && feed && rngs && so; i++) {
    unsigned long l0 = pcuda_launches(ctx);
    double t0 = bench_now_s();
    rc = pcuda_forward_cached(&dm, &kv, feed, NULL, G, 1, prompt_len + i, why,
                              sizeof why); /* waits for its kernels */
    double t1 = bench_now_s();
    unsigned long l1 = pcuda_launches(ctx);
    if (rc == PL_OK)
      rc = pcuda_sample_batch(ctx, kv.logits, (size_t)m->cfg.vocab, G,
                              m->cfg.vocab, &sp, rngs, so, why, sizeof why);
    t_fwd += t1 - t0;
    t_smp += bench_now_s() - t1;
    l_fwd += l1 - l0;
    l_smp += pcuda_launches(ctx) - l1;
    for (int g = 0; g < G && rc == PL_OK; g++)
      feed[g] = so[g].token;
  }
  if (rc == PL_OK)
    printf("pcuda decode step (G=%d, after %d tokens): cached forward %.1f us "
           "(%.1f launches), sampler %.1f us (%.1f launches, with its "
           "allocation)\n",
           G, prompt_len, 1e6 * t_fwd / DECODE_STEPS,
           (double)l_fwd / DECODE_STEPS, 1e6 * t_smp / DECODE_STEPS,
           (double)l_smp / DECODE_STEPS);
  else
    fprintf(stderr, "bench_policy_cuda: decode: %s\n", why);
  free(feed);
  free(rngs);
  free(so);
  pcuda_kv_cache_free(&kv);
  pcuda_model_free(&dm);
}

/* What the memory arena saves where a GRPO run allocates: one
 * pcuda_generate per group, each taking and freeing its KV cache, scratch
 * and sampler. Generations per second of CHURN_CALLS short ones (G rows of
 * CHURN_TOKENS after the prompt, after one untimed), on ctx; 0 on failure.
 * Run on a context with the arena and on one opened with PCUDA_ARENA=off
 * (a cuMemAlloc / cuMemFree per buffer). */
#define CHURN_CALLS 20
#define CHURN_TOKENS 16
static double generate_churn(const pl_model *m, pcuda_ctx *ctx,
                             const int32_t *prompt, int G) {
  char why[256];
  pcuda_model dm;
  if (pcuda_model_init(&dm, ctx, m, why, sizeof why) != PL_OK) {
    fprintf(stderr, "bench_policy_cuda: %s\n", why);
    return 0;
  }
  pl_sampling sp = pl_sampling_default();
  double t0 = 0;
  int rc = PL_OK;
  for (int i = -1; i < CHURN_CALLS && rc == PL_OK; i++) {
    if (i == 0) t0 = bench_now_s();
    pl_generation gen;
    rc = pcuda_generate(&dm, prompt, PROMPT_LEN, G, CHURN_TOKENS, -1, &sp,
                        (uint64_t)(i + 2), &gen, why, sizeof why);
    if (rc == PL_OK) pl_generation_free(&gen);
  }
  double dt = bench_now_s() - t0;
  if (rc != PL_OK) fprintf(stderr, "bench_policy_cuda: churn: %s\n", why);
  pcuda_model_free(&dm);
  return rc == PL_OK ? CHURN_CALLS / dt : 0;
}

/* --emu: the kernel on the emulator behind pcuda_set_matmul. */
static int emu_runner(void *impl, const float *A, const float *B, float *C,
                      int M, int N, int K, char *why, size_t whylen) {
  return kl_emu_run(impl, A, B, C, M, N, K, 0, why, whylen) == KL_OK ? 0 : -1;
}

/* Compiles FILE.cu with NVRTC and installs it on ctx (with emu, builds it
 * for the emulator into *emu_mod instead); 0 or -1 with why. */
static int load_kernel(pcuda_ctx *ctx, const char *path, int emu,
                       kl_emu_module **emu_mod, char *why, size_t whylen) {
  char *src = NULL;
  size_t len = 0;
  if (kl_source_load(path, &src, &len, why, whylen) != KL_OK) return -1;
  if (emu) {
    int rc = kl_emu_build(src, len, emu_mod, NULL, NULL, why, whylen);
    free(src);
    if (rc != KL_OK) return -1;
    pcuda_set_matmul(ctx, emu_runner, *emu_mod);
    return 0;
  }
  if (kl_nvrtc_load(why, whylen) != KL_OK) {
    free(src);
    return -1;
  }
  size_t clen = len + strlen(kl_contract_check) + 2;
  char *csrc = malloc(clen);
  snprintf(csrc, clen, "%s\n%s", src, kl_contract_check);
  free(src);
  kl_compiled cc;
  memset(&cc, 0, sizeof cc);
  int rc = kl_nvrtc_compile(csrc, strlen(csrc), "sm_90", 1, &cc, why, whylen);
  free(csrc);
  if (rc == KL_OK && !cc.has_launch) {
    snprintf(why, whylen, "%.300s: no KL_LAUNCH geometry in its cubin", path);
    rc = KL_EINPUT;
  }
  if (rc == KL_OK) {
    const int g[5] = {cc.launch.block_x, cc.launch.block_y, cc.launch.tile_rows,
                      cc.launch.tile_cols, cc.launch.dyn_smem_bytes};
    rc = pcuda_device_load_matmul(ctx, cc.cubin, cc.cubin_size, g, why,
                                  whylen) == PL_OK
             ? KL_OK
             : KL_EENV;
  }
  kl_compiled_free(&cc);
  return rc == KL_OK ? 0 : -1;
}

/* Runs bench_policy_torch.py on the device; fills out (0 where it did not
 * run) and says why not in note. */
static void torch_cuda(const char *python, const char *src_dir,
                       const pl_config *c, int B, int T, int steps,
                       const char *device, speed *out, char *note,
                       size_t notelen) {
  char prefix[64];
  snprintf(prefix, sizeof prefix, "torch (%s) ", device);
  for (int k = 0; k < 2; k++) {
    char cmd[1500], last[512];
    snprintf(
        cmd, sizeof cmd,
        "%s '%s/tests/bench/bench_policy_torch.py' %d %d %d %d %d %d %d %d "
        "4 --device %s%s 2>&1",
        python, src_dir, c->vocab, c->d_model, c->n_layers, c->n_heads, c->d_ff,
        B, k ? NEW_TOKENS : T, k ? 1 : steps, device, k ? " --sample" : "");
    double tps =
        bench_run_rate(cmd,
                       k ? "torch sampling: %lf tok/s"
                         : "torch: %*f ms/step, loss %*f, %lf tok/s",
                       prefix, k ? NULL : "torch device:", last, sizeof last);
    if (tps <= 0) {
      snprintf(note, notelen, "`%s` failed: %s", cmd, last);
      return;
    }
    if (k)
      out->sample_tps = tps;
    else
      out->train_tps = tps;
  }
}

static void ratio(const char *what, const char *a, double x, const char *b,
                  double y) {
  if (x > 0 && y > 0)
    printf("%s: %s %.0f tok/s vs %s %.0f tok/s: ratio %.2fx\n", what, a, x, b,
           y, x / y);
}

int main(int argc, char **argv) {
  /* line by line: a run cut short by a timeout keeps what it printed */
  setvbuf(stdout, NULL, _IOLBF, 0);
  pl_config cfg = {2048, 256, 4, 4, 0, 0};
  int B = 8, T = 256, steps = 5, threads = 0, torch = 1, emu = 0;
  const char *src_dir = KL_DEFAULT_SOURCE_DIR, *matmul = NULL;
  const char *python = "python3";
  for (int i = 1; i < argc; i++) {
    int *dst = bench_model_option(argv[i], &cfg, &B, &T, &steps, &threads);
    if (dst && i + 1 < argc)
      *dst = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--matmul") && i + 1 < argc)
      matmul = argv[++i];
    else if (!strcmp(argv[i], "--python") && i + 1 < argc)
      python = argv[++i];
    else if (!strcmp(argv[i], "--no-torch"))
      torch = 0;
    else if (!strcmp(argv[i], "--emu"))
      emu = 1;
    else if (argv[i][0] != '-')
      src_dir = argv[i];
    else {
      fprintf(stderr, "bench_policy_cuda: unknown argument %s\n", argv[i]);
      return 2;
    }
  }
  if (steps < 1 || steps > 1000) steps = 5;
  if (threads <= 0) threads = (int)sysconf(_SC_NPROCESSORS_ONLN);
  cfg.d_ff = pl_default_ff(cfg.d_model);
  cfg.max_seq = T > PROMPT_LEN + NEW_TOKENS ? T : PROMPT_LEN + NEW_TOKENS;
  if (cfg.max_seq < LONG_PROMPT + DECODE_STEPS) /* decode_breakdown's */
    cfg.max_seq = LONG_PROMPT + DECODE_STEPS;
  char kernel_path[1024];
  if (matmul)
    snprintf(kernel_path, sizeof kernel_path, "%s", matmul);
  else
    snprintf(kernel_path, sizeof kernel_path, "%s/kernels/seeds/07_warptile.cu",
             src_dir);
  const char *kernel_name = strrchr(kernel_path, '/');
  kernel_name = kernel_name ? kernel_name + 1 : kernel_path;

  char why[512];
  pcuda_ctx *ctx = NULL;
  if (emu) {
    if (pcuda_emu_open(&ctx, 0, why, sizeof why) != PL_OK) {
      fprintf(stderr, "bench_policy_cuda: --emu: %s\n", why);
      return 2;
    }
    printf("bench_policy_cuda: --emu: a dry run on the CPU emulator; the "
           "pcuda numbers are NOT device speed\n");
  } else if (pcuda_device_open(&ctx, PCUDA_GEMM_AUTO, why, sizeof why) !=
             PL_OK) {
    printf("bench_policy_cuda: skipped: no device for the policy's CUDA "
           "runtime (%s)\n",
           why);
    return 0;
  }
  pl_model m;
  if (pl_model_init(&m, &cfg, 1, why, sizeof why) != PL_OK) {
    fprintf(stderr, "bench_policy_cuda: %s\n", why);
    return 2;
  }
  pl_set_num_threads(threads);
  printf("model: vocab %d, d %d, %d layers, %d heads, d_ff %d: %zu "
         "parameters; training batch B=%d T=%d, sampling G=%d x %d tokens "
         "after %d; cpu: %d threads; device: %s\n",
         cfg.vocab, cfg.d_model, cfg.n_layers, cfg.n_heads, cfg.d_ff,
         m.num_params, B, T, B, NEW_TOKENS, PROMPT_LEN, threads,
         pcuda_describe(ctx));
  int32_t *x = malloc(sizeof(int32_t) * B * T);
  int32_t *y = malloc(sizeof(int32_t) * B * T);
  uint32_t s = bench_batch(x, y, B * T, cfg.vocab);
  /* the prompt: its first PROMPT_LEN tokens, all for the long decode */
  static int32_t prompt[LONG_PROMPT];
  bench_tokens(prompt, LONG_PROMPT, cfg.vocab, &s);
  /* Every path starts from the same weights: the trainers update copies
   * (the CPU one last, so its updates touch nobody else's start). */
  float *start = malloc(m.num_params * sizeof(float));
  memcpy(start, m.params_memory, m.num_params * sizeof(float));

  speed cpu = {0}, dev = {0}, kern = {0}, tc = {0}, b16 = {0};
  const int F32 = PCUDA_DTYPE_FP32, BF16 = PCUDA_DTYPE_BF16;
  sample(&m, ctx, F32, prompt, B, &dev);
  train(&m, ctx, F32, x, y, B, T, steps, &dev);
  printf("pcuda (%s): training %.0f tok/s (first loss %.4f), sampling "
         "%.0f tok/s\n",
         pcuda_describe(ctx), dev.train_tps, (double)dev.first_loss,
         dev.sample_tps);
  sample(&m, ctx, BF16, prompt, B, &b16);
  train(&m, ctx, BF16, x, y, B, T, steps, &b16);
  printf("pcuda bf16 GEMMs (fp32 master): training %.0f tok/s (first loss "
         "%.4f), sampling %.0f tok/s\n",
         b16.train_tps, (double)b16.first_loss, b16.sample_tps);
  decode_breakdown(&m, ctx, prompt, PROMPT_LEN, B);
  if (!emu) /* the long one: minutes of prefill on the emulator */
    decode_breakdown(&m, ctx, prompt, LONG_PROMPT, B);
  /* the arena against a buffer per backend allocation, same run */
  double churn = generate_churn(&m, ctx, prompt, B), churn_off = 0;
  setenv("PCUDA_ARENA", "off", 1);
  pcuda_ctx *ctx_off = NULL;
  char owhy[256];
  int orc =
      emu ? pcuda_emu_open(&ctx_off, 0, owhy, sizeof owhy)
          : pcuda_device_open(&ctx_off, PCUDA_GEMM_AUTO, owhy, sizeof owhy);
  unsetenv("PCUDA_ARENA");
  if (orc == PL_OK) {
    churn_off = generate_churn(&m, ctx_off, prompt, B);
    pcuda_close(ctx_off);
  }
  printf("pcuda generate churn (%d calls of G=%d x %d tokens): %.1f calls/s "
         "with the arena, %.1f with PCUDA_ARENA=off\n",
         CHURN_CALLS, B, CHURN_TOKENS, churn, churn_off);
  pcuda_mem_stats mem;
  pcuda_mem_stats_get(ctx, &mem);
  printf("pcuda memory over the runs above: peak %.1f MiB in use, %.1f MiB "
         "held in %d chunks; %lu buffers from %lu backend allocations "
         "(the arena, pcuda_arena.c)\n",
         mem.peak / 1048576.0, mem.reserved / 1048576.0, mem.chunks, mem.allocs,
         mem.backend_allocs);
  /* The candidate kernel last on the device: a kernel that fails leaves
   * its error on the context (and a fault kills the primary context), which
   * would spoil every device measurement after it. */
  char kwhy[512] = "";
  kl_emu_module *emu_mod = NULL;
  if (load_kernel(ctx, kernel_path, emu, &emu_mod, kwhy, sizeof kwhy) == 0) {
    sample(&m, ctx, F32, prompt, B, &kern);
    train(&m, ctx, F32, x, y, B, T, steps, &kern);
    printf("pcuda, GEMMs through %s: training %.0f tok/s (first loss %.4f), "
           "sampling %.0f tok/s\n",
           kernel_name, kern.train_tps, (double)kern.first_loss,
           kern.sample_tps);
    pcuda_set_matmul(ctx, NULL, NULL);
  } else {
    printf("kernel %s: not measured: %s\n", kernel_name, kwhy);
  }
  sample(&m, NULL, F32, prompt, B, &cpu);
  train(&m, NULL, F32, x, y, B, T, steps, &cpu);
  printf("cpu (OpenBLAS, %d threads): training %.0f tok/s (first loss %.4f), "
         "sampling %.0f tok/s\n",
         threads, cpu.train_tps, (double)cpu.first_loss, cpu.sample_tps);
  memcpy(m.params_memory, start, m.num_params * sizeof(float));
  char note[1700] = "";
  const char *tdev = emu ? "cpu" : "cuda";
  if (torch)
    torch_cuda(python, src_dir, &cfg, B, T, steps, tdev, &tc, note,
               sizeof note);
  else
    snprintf(note, sizeof note, "--no-torch");
  if (tc.train_tps <= 0 || tc.sample_tps <= 0)
    printf("torch (%s): not measured: %s\n", tdev, note);
  char tname[32];
  snprintf(tname, sizeof tname, "torch (%s)", tdev);

  ratio("training", "pcuda", dev.train_tps, "cpu", cpu.train_tps);
  ratio("sampling", "pcuda", dev.sample_tps, "cpu", cpu.sample_tps);
  ratio("training", "pcuda", dev.train_tps, tname, tc.train_tps);
  ratio("sampling", "pcuda", dev.sample_tps, tname, tc.sample_tps);
  ratio("training", "pcuda bf16", b16.train_tps, "pcuda fp32", dev.train_tps);
  ratio("sampling", "pcuda bf16", b16.sample_tps, "pcuda fp32", dev.sample_tps);
  char kname[600];
  snprintf(kname, sizeof kname, "kernel %.500s", kernel_name);
  ratio("training", kname, kern.train_tps, "pcuda (default GEMM)",
        dev.train_tps);
  ratio("sampling", kname, kern.sample_tps, "pcuda (default GEMM)",
        dev.sample_tps);
  ratio("training", kname, kern.train_tps, "cpu", cpu.train_tps);
  if (churn > 0 && churn_off > 0)
    printf("generate churn: pcuda arena %.1f calls/s vs pcuda "
           "PCUDA_ARENA=off %.1f calls/s: ratio %.2fx\n",
           churn, churn_off, churn / churn_off);
  float worst = 0;
  if (kern.train_tps > 0)
    worst = fmaxf(fabsf(kern.first_loss - cpu.first_loss),
                  fabsf(dev.first_loss - cpu.first_loss));
  else
    worst = fabsf(dev.first_loss - cpu.first_loss);
  printf("first losses agree within %.2g (cpu %.6f)\n", (double)worst,
         (double)cpu.first_loss);
  free(start);
  free(x);
  free(y);
  pl_model_free(&m);
  pcuda_close(ctx);
  kl_emu_free(emu_mod);
  return 0;
}
