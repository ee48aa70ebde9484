/*
 * lab/policy_matmul.c — --policy-matmul RUN.h5 for `kernlab prime`, `run`
 * and `generate`: the lab accelerating its own policy with the best fp32
 * kernel a finished campaign found. The kernel is the file's best correct,
 * unflagged candidate (lab_best_candidate, the "best" of lab/compare.c),
 * built the way the harness builds candidates, checked against the default
 * path on the policy's own GEMM shapes, and only then given the policy's
 * GEMMs:
 *   - on the CPU (no policy device): kl_emu_compile (the host compiler
 *     under the sandbox's host-compile launcher when the command set it),
 *     then the module in a sandboxed worker (sbx_matmul: run-cpu-emu, then
 *     run-cpu-emu-loaded, as every candidate runs) behind a pl_gemm_hook
 *     (policy.h) that sends it each GEMM. Slow (an emulated GPU): meant
 *     for tests with a tiny model;
 *   - on a device: NVRTC (kl_nvrtc_compile for sm_90, the contract check
 *     appended, as kernels/check.c does), then pcuda_device_load_matmul:
 *     the cubin in the policy's CUDA context behind pcuda_gemm.
 *
 * Which GEMMs: the linear layers and the tied head, forward and backward,
 * and the cached forward of sampling (policy.h's pl_linear_gemm; pcuda.h's
 * pcuda_gemm). A candidate computes only C = A·B, NN, contiguous; the
 * policy needs A·B^T (forward), A·B (input gradient) and C += A^T·B
 * (weight gradient). Every one of them is routed, whatever its shape:
 * operands that are transposed or strided are packed into a contiguous
 * scratch first, and alpha and beta are applied after (here for the CPU,
 * in pcuda_runtime.c for the device). Attention's per-head products stay
 * where they are (BLAS on the CPU, the attention kernels on a device).
 *
 * The check: for each of the fifteen GEMMs of a layer (five weight shapes x
 * forward, input gradient, weight gradient with beta 1), at 1, 67 and the
 * command's batch rows (at most 512) tokens, the same random inputs
 * (kl_fill_random) through the default path (cblas_sgemm; cuBLAS or the
 * tiled kernel) and through the candidate. It passes when every element
 * is finite and within 2 x KL_TOL_ELEM x (|alpha| sum_k |A_ik||B_kj| +
 * |beta C_ij|) of the default path's, and the Frobenius norm of the
 * difference is within 2 x KL_TOL_REL of the default's: the harness's fp32
 * tolerances (kernels.h), doubled because the default path rounds too
 * (kl_compare_fp32, with the bound from pl_gemm_bound).
 * A kernel that fails it is refused with the shape and the error, exit 2:
 * never a silent fallback, so a run that asked for a kernel either uses it
 * or stops (a timing read as the kernel's would otherwise be BLAS's).
 * Likewise exit 2 for a file with no correct, unflagged kernel, a source
 * that fails the source checks or raises a static anti-cheat flag now, one
 * that does not compile or has no launch geometry; exit 3 for a missing
 * compiler or NVRTC. On the CPU, a launch that fails later (mid-training)
 * is reported on stderr once and the remaining GEMMs go to BLAS; the
 * command prints the count at the end (lab_policy_matmul_describe).
 * Both paths also check the first call of every shape met later against
 * the default path by the same rule (policy/gemm_hook.c on the CPU,
 * pcuda_set_matmul on a device): a kernel wrong at a shape the check above
 * missed is dropped there, that call keeping the default's product, and
 * the command's closing line says so (lab_policy_matmul_report).
 *
 * Trust. A results file's kernels are past candidates: text a policy
 * wrote, untrusted code that the harness only ever ran inside the sandbox.
 * On the CPU it still runs there: in its own confined worker (no files,
 * no network, no new processes or threads, no code patching, a deadline
 * per GEMM); a kernel that traps, crashes or hangs ends its worker, and
 * the GEMMs go back to BLAS with a message. On a device it runs in the
 * policy's own CUDA context: it cannot make system calls, but it can read
 * and write every buffer of the policy and hang the device. The file's own
 * `correct` and `flags` are not trusted on either path: the text is
 * re-validated and re-scanned (kl_source_validate, kl_scan: no allowlist
 * escape, no asm, no timers, ...) and checked as above. On a device those
 * are filters, not a sandbox: pass only results files of your own
 * campaigns.
 */
#include "lab/lab.h"
#include "lab/policy_device.h"
#include "sandbox/sandbox.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* One GEMM of the CPU path, emulated: the largest of a small model's take
 * seconds; a kernel that takes this long is stuck. */
#define MATMUL_DEADLINE_S 120

struct lab_matmul {
  pcuda_ctx *ctx;  /* the device it is installed on; NULL: the CPU hook */
  sbx_matmul *srv; /* the CPU path: the kernel in its sandboxed worker */
  int64_t id;
  char label[4 * 128 + 8]; /* the file's 128 bytes, made printable */
  float *a, *b, *c;        /* host scratch of the CPU hook */
  size_t cap_a, cap_b, cap_c;
  long long calls;
  int failed; /* the CPU hook gave up (a launch failed) */
  int in_use; /* the check passed: the policy's GEMMs are routed */
  char fail_why[768];
  double worst;  /* the check's largest error / tolerance */
  int tile_rows; /* the device kernel's rows per block (grid y's divisor) */
  char desc[768];
  float *s; /* the check's element bound (pl_gemm_bound) */
  size_t cap_s;
};

/* One GEMM of the policy, as pl_linear_gemm takes it (alpha aside). */
typedef struct gemm_call {
  int M, N, K, trans_a, trans_b, lda, ldb, ldc;
  float beta;
  const char *what;
} gemm_call;

static int compare_call(lab_matmul *mm, const gemm_call *g, float alpha,
                        const float *A, const float *B, const float *C0,
                        const float *Cd, const float *Cc, char *why,
                        size_t whylen);

/* Grows *buf to hold n floats; 0 or -1. */
static int grow(float **buf, size_t *cap, size_t n) {
  if (n <= *cap) return 0;
  float *p = realloc(*buf, n * sizeof(float));
  if (!p) return -1;
  *buf = p;
  *cap = n;
  return 0;
}

/* dst (rows, cols) contiguous = op(src): src[r*ld + c], or src[c*ld + r]
 * when trans. */
static void pack(float *dst, const float *src, int rows, int cols, int ld,
                 int trans) {
  for (int r = 0; r < rows; r++)
    for (int c = 0; c < cols; c++)
      dst[(size_t)r * cols + c] =
          trans ? src[(size_t)c * ld + r] : src[(size_t)r * ld + c];
}

/* The pl_gemm_hook of the CPU path: packs, runs the kernel on the
 * emulator, applies alpha and beta; 0 with C written. Declines (returns 1,
 * BLAS does the call) once a launch failed, and from the failing call on.
 * The policy checks the first call of every new shape against BLAS
 * (policy/gemm_hook.c) and drops the hook on a disagreement. */
static int emu_gemm(void *ctx, int trans_a, int trans_b, int M, int N, int K,
                    float alpha, const float *A, int lda, const float *B,
                    int ldb, float beta, float *C, int ldc) {
  lab_matmul *mm = ctx;
  if (mm->failed) return 1;
  int pack_a = trans_a || lda != K, pack_b = trans_b || ldb != N;
  int direct = alpha == 1.0f && beta == 0.0f && ldc == N;
  if ((pack_a && grow(&mm->a, &mm->cap_a, (size_t)M * K)) ||
      (pack_b && grow(&mm->b, &mm->cap_b, (size_t)K * N)) ||
      (!direct && grow(&mm->c, &mm->cap_c, (size_t)M * N))) {
    snprintf(mm->fail_why, sizeof mm->fail_why, "out of memory at %dx%dx%d", M,
             N, K);
    mm->failed = 1;
    return 1;
  }
  if (pack_a) pack(mm->a, A, M, K, lda, trans_a);
  if (pack_b) pack(mm->b, B, K, N, ldb, trans_b);
  float *out = direct ? C : mm->c;
  char why[512];
  if (sbx_matmul_run(mm->srv, pack_a ? mm->a : A, pack_b ? mm->b : B, out, M, N,
                     K, why, sizeof why) != KL_OK) {
    snprintf(mm->fail_why, sizeof mm->fail_why, "%s", why);
    mm->failed = 1;
    if (mm->in_use)
      fprintf(stderr,
              "policy-matmul: kernel %lld (%s) failed %s; the remaining GEMMs "
              "use BLAS\n",
              (long long)mm->id, mm->label, mm->fail_why);
    return 1;
  }
  if (!direct)
    for (int m = 0; m < M; m++)
      for (int n = 0; n < N; n++) {
        float *o = C + (size_t)m * ldc + n;
        float t = alpha * mm->c[(size_t)m * N + n];
        *o = beta == 0.0f ? t : t + beta * *o;
      }
  mm->calls++;
  return 0;
}

/* ---- the check against the default path ---- */

/* The policy's GEMMs for `rows` tokens (policy/model.c's matmul_forward
 * and matmul_backward, per weight (OC, IC)); returns how many. */
static int policy_calls(const pl_config *cfg, int rows, gemm_call *out) {
  int C = cfg->d_model, F = cfg->d_ff, V = cfg->vocab;
  const struct {
    int IC, OC;
    const char *name;
  } w[] = {{C, 3 * C, "wqkv"},
           {C, C, "wo"},
           {C, 2 * F, "w13"},
           {F, C, "w2"},
           {C, V, "head"}};
  int n = 0;
  for (size_t i = 0; i < sizeof w / sizeof w[0]; i++) {
    int IC = w[i].IC, OC = w[i].OC;
    out[n++] = (gemm_call){rows, OC, IC, 0, 1, IC, IC, OC, 0.0f, w[i].name};
    out[n++] = (gemm_call){rows, IC, OC, 0, 0, OC, IC, IC, 0.0f, w[i].name};
    out[n++] = (gemm_call){OC, IC, rows, 1, 0, OC, IC, IC, 1.0f, w[i].name};
  }
  return n;
}

static const char *call_kind(const gemm_call *g) {
  return g->trans_b   ? "forward"
         : g->trans_a ? "weight gradient"
                      : "input gradient";
}

/* Cc (the candidate's) against Cd (the default path's) for the call g
 * with alpha, from A, B and C0 (C before the call), by the header's rule;
 * 0 when they agree, else -1 with why. Records the worst error / tolerance
 * in mm->worst. */
static int compare_call(lab_matmul *mm, const gemm_call *g, float alpha,
                        const float *A, const float *B, const float *C0,
                        const float *Cd, const float *Cc, char *why,
                        size_t whylen) {
  size_t nc = (size_t)(g->M - 1) * g->ldc + g->N;
  if (grow(&mm->s, &mm->cap_s, nc) ||
      pl_gemm_bound(g->trans_a, g->trans_b, g->M, g->N, g->K, alpha, A, g->lda,
                    B, g->ldb, g->beta, C0, mm->s, g->ldc) != 0) {
    snprintf(why, whylen, "out of memory");
    return -1;
  }
  kl_fp32_agreement a;
  kl_compare_fp32(Cc, Cd, mm->s, g->M, g->N, g->ldc, &a);
  if (a.worst > mm->worst) mm->worst = a.worst;
  if (!a.pass) {
    char say[512];
    kl_fp32_agreement_say(&a, Cc, Cd, g->ldc, say, sizeof say);
    snprintf(why, whylen,
             "disagrees with the default path at %dx%dx%d (%s %s): %s", g->M,
             g->N, g->K, g->what, call_kind(g), say);
    return -1;
  }
  return 0;
}

/* One call through both paths; 0 when they agree (the header's rule), else
 * -1 with why. A path that fails to run fills why too. */
static int check_call(lab_matmul *mm, const gemm_call *g, uint64_t seed,
                      char *why, size_t whylen) {
  size_t na = (size_t)(g->trans_a ? g->K : g->M) * g->lda;
  size_t nb = (size_t)(g->trans_b ? g->N : g->K) * g->ldb;
  size_t nc = (size_t)g->M * g->ldc;
  float *A = malloc(na * sizeof(float)), *B = malloc(nb * sizeof(float));
  float *C0 = malloc(nc * sizeof(float)), *Cd = malloc(nc * sizeof(float));
  float *Cc = malloc(nc * sizeof(float));
  float *dev = NULL;
  int rc = -1;
  if (!A || !B || !C0 || !Cd || !Cc) {
    snprintf(why, whylen, "out of memory");
    goto done;
  }
  kl_fill_random(A, na, seed, 0);
  kl_fill_random(B, nb, seed, 1);
  kl_fill_random(C0, nc, seed, 2);
  memcpy(Cd, C0, nc * sizeof(float));
  memcpy(Cc, C0, nc * sizeof(float));
  if (g->beta == 0.0f) kl_poison(Cc, nc); /* must be written, not read */
  if (!mm->ctx) {
    pl_blas_gemm(g->trans_a, g->trans_b, g->M, g->N, g->K, 1.0f, A, g->lda, B,
                 g->ldb, g->beta, Cd, g->ldc);
    if (emu_gemm(mm, g->trans_a, g->trans_b, g->M, g->N, g->K, 1.0f, A, g->lda,
                 B, g->ldb, g->beta, Cc, g->ldc) != 0) {
      snprintf(why, whylen, "%s", mm->fail_why);
      goto done;
    }
  } else {
    pcuda_ctx *ctx = mm->ctx;
    dev = pcuda_alloc(ctx, (na + nb + nc) * sizeof(float));
    if (dev) {
      float *dA = dev, *dB = dev + na, *dC = dev + na + nb;
      pcuda_upload(ctx, dA, A, na * sizeof(float));
      pcuda_upload(ctx, dB, B, nb * sizeof(float));
      for (int use = 0; use < 2; use++) {
        pcuda_upload(ctx, dC, use ? Cc : Cd, nc * sizeof(float));
        pcuda_linear_gemm(ctx, use, dC, dA, dB, g->M, g->N, g->K, g->lda,
                          g->ldb, g->ldc, g->trans_a, g->trans_b, 1.0f,
                          g->beta);
        pcuda_download(ctx, use ? Cc : Cd, dC, nc * sizeof(float));
      }
    }
    if (pcuda_status(ctx, why, whylen) != PL_OK) goto done;
    /* pcuda checks a shape's first call itself and, on a disagreement,
     * drops the kernel and hands back the default's product: Cc would then
     * equal Cd, and the comparison below pass a kernel just refused */
    char dropped[600];
    if (pcuda_matmul_dropped(ctx, NULL, dropped, sizeof dropped)) {
      snprintf(why, whylen, "%s", dropped);
      goto done;
    }
  }
  if (compare_call(mm, g, 1.0f, A, B, C0, Cd, Cc, why, whylen) != 0) goto done;
  rc = 0;
done:
  if (mm->ctx && dev) pcuda_free(mm->ctx, dev);
  free(A);
  free(B);
  free(C0);
  free(Cd);
  free(Cc);
  return rc;
}

/* Builds the kernel for ctx's backend: 0, or a LAB_EXIT_* code with why. */
static int build(lab_matmul *mm, const char *src, size_t len, char *why,
                 size_t whylen) {
  char w[700];
  if (!mm->ctx) {
    char so_path[512];
    int rc = kl_emu_compile(src, len, so_path, sizeof so_path, NULL, NULL, w,
                            sizeof w);
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    if (rc == KL_OK)
      rc = sbx_matmul_open(so_path, kl_emu_needs_fibers(src),
                           cores > 0 ? (int)cores : 1, MATMUL_DEADLINE_S,
                           &mm->srv, w, sizeof w);
    if (rc == KL_OK) return LAB_EXIT_OK;
    snprintf(why, whylen, "%s on cpu-emu: %s",
             rc == KL_EENV ? "cannot build it" : "it does not build", w);
    return rc == KL_EENV ? LAB_EXIT_ENV : LAB_EXIT_USAGE;
  }
  if (kl_nvrtc_load(w, sizeof w) != KL_OK) {
    snprintf(why, whylen, "cannot compile it for the device: %s", w);
    return LAB_EXIT_ENV;
  }
  size_t clen = len + strlen(kl_contract_check) + 2;
  char *csrc = malloc(clen);
  if (!csrc) {
    snprintf(why, whylen, "out of memory");
    return LAB_EXIT_ENV;
  }
  snprintf(csrc, clen, "%s\n%s", src, kl_contract_check);
  kl_compiled cc;
  memset(&cc, 0, sizeof cc);
  int rc = kl_nvrtc_compile(csrc, strlen(csrc), "sm_90", 1, &cc, w, sizeof w);
  free(csrc);
  int ex = LAB_EXIT_OK;
  if (rc != KL_OK) {
    snprintf(why, whylen, "NVRTC: %s", w);
    ex = rc == KL_ECOMPILE ? LAB_EXIT_USAGE : LAB_EXIT_ENV;
  } else if (!cc.has_launch ||
             kl_launch_validate(&cc.launch, w, sizeof w) != KL_OK) {
    snprintf(why, whylen, "no valid KL_LAUNCH geometry in its cubin%s%s",
             cc.has_launch ? ": " : "", cc.has_launch ? w : "");
    ex = LAB_EXIT_USAGE;
  } else {
    const int g[5] = {cc.launch.block_x, cc.launch.block_y, cc.launch.tile_rows,
                      cc.launch.tile_cols, cc.launch.dyn_smem_bytes};
    mm->tile_rows = cc.launch.tile_rows;
    if (pcuda_device_load_matmul(mm->ctx, cc.cubin, cc.cubin_size, g, w,
                                 sizeof w) != PL_OK) {
      snprintf(why, whylen, "%s", w);
      ex = LAB_EXIT_ENV;
    }
  }
  kl_compiled_free(&cc);
  return ex;
}

int lab_policy_matmul_open(const char *path, pcuda_ctx *ctx,
                           const pl_config *cfg, int64_t rows, lab_matmul **out,
                           char *why, size_t whylen) {
  *out = NULL;
  char w[1024];
  int code = 0;
  res_reader *r = res_open_read(path, &code, w, sizeof w);
  if (!r) {
    snprintf(why, whylen, "--policy-matmul %s: %s", path, w);
    return code == RES_EENV ? LAB_EXIT_ENV : LAB_EXIT_USAGE;
  }
  lab_matmul *mm = calloc(1, sizeof *mm);
  char *src = NULL;
  size_t len = 0;
  int ex = LAB_EXIT_USAGE;
  if (!mm) {
    snprintf(why, whylen, "out of memory");
    res_reader_close(r);
    return LAB_EXIT_ENV;
  }
  mm->ctx = ctx;
  if (!ctx) pl_set_gemm_hook(NULL, NULL); /* one kernel per process */
  mm->id = lab_best_candidate(r);
  if (mm->id < 0) {
    snprintf(why, whylen,
             "--policy-matmul %s: the file holds no correct, unflagged kernel "
             "(%lld candidates); give the results of a campaign or of "
             "`kernlab eval --out` that found one",
             path, (long long)res_count(r));
    goto fail;
  }
  const res_candidate *c = res_get(r, mm->id);
  /* the file's label is as a policy wrote it: shown on a terminal, so
   * without control bytes (as the tables show it) */
  lab_printable(c->label, strnlen(c->label, sizeof c->label), mm->label,
                sizeof mm->label);
  if (res_source(r, mm->id, &src, &len, w, sizeof w) != RES_OK) {
    snprintf(why, whylen, "--policy-matmul %s: kernel %lld: %s", path,
             (long long)mm->id, w);
    goto fail;
  }
  /* The stored verdict is the file's word: the text is checked again. */
  kl_flags flags = 0;
  if (kl_source_validate(src, len, w, sizeof w) != KL_OK ||
      (flags = kl_scan(src, len, w, sizeof w)) != 0) {
    snprintf(why, whylen,
             "--policy-matmul %s: kernel %lld (%s) %s: %s (the file marks it "
             "correct and unflagged; refusing it)",
             path, (long long)mm->id, mm->label,
             flags ? "raises anti-cheat flags" : "fails the source checks", w);
    goto fail;
  }
  ex = build(mm, src, len, w, sizeof w);
  if (ex != LAB_EXIT_OK) {
    snprintf(why, whylen, "--policy-matmul %s: kernel %lld (%s): %s", path,
             (long long)mm->id, mm->label, w);
    goto fail;
  }
  /* A device grid has at most 65535 blocks in y: the kernel must cover the
   * policy's tallest GEMM (its token rows, or a weight's output width in
   * the weight gradient) in that many tiles, which the check below, at 512
   * rows at most, would not show. */
  int64_t tallest = rows; /* in 64 bits: a campaign's rows may pass 2^31 */
  const int64_t outs[4] = {cfg->vocab, 3 * (int64_t)cfg->d_model,
                           2 * (int64_t)cfg->d_ff, cfg->d_model};
  for (int i = 0; i < 4; i++)
    if (outs[i] > tallest) tallest = outs[i];
  if (mm->tile_rows > 0 &&
      (tallest + mm->tile_rows - 1) / mm->tile_rows > 65535) {
    snprintf(why, whylen,
             "--policy-matmul %s: kernel %lld (%s) covers %d rows per block; "
             "the policy's GEMMs reach %lld rows, over the device's 65535 "
             "blocks in y; refusing it",
             path, (long long)mm->id, mm->label, mm->tile_rows,
             (long long)tallest);
    ex = LAB_EXIT_USAGE;
    goto fail;
  }
  /* The check, before the policy sees it. */
  const int sizes[3] = {1, 67, rows < 1 ? 1 : rows > 512 ? 512 : (int)rows};
  int checked = 0;
  for (int s = 0; s < 3; s++) {
    if (s == 2 && (sizes[2] == 1 || sizes[2] == 67)) continue;
    gemm_call calls[15];
    int n_calls = policy_calls(cfg, sizes[s], calls);
    for (int i = 0; i < n_calls; i++, checked++)
      if (check_call(mm, &calls[i], 0x5eed0000u + (uint64_t)(s * 16 + i), w,
                     sizeof w) != 0) {
        snprintf(why, whylen,
                 "--policy-matmul %s: kernel %lld (%s) %s; refusing it", path,
                 (long long)mm->id, mm->label, w);
        /* the kernel's fault (exit 2) unless the machine ran out */
        ex = strstr(w, "out of memory") || strstr(w, "OUT_OF_MEMORY")
                 ? LAB_EXIT_ENV
                 : LAB_EXIT_USAGE;
        goto fail;
      }
  }
  mm->calls = 0;
  char backend[sizeof c->backend + 1];
  lab_printable(c->backend, strnlen(c->backend, sizeof c->backend), backend,
                sizeof backend);
  snprintf(mm->desc, sizeof mm->desc,
           "kernel %lld (%s, %.1f us on %s) of %s, on %s; it agreed with "
           "the default path on the policy's %d GEMMs (worst %.2g of the "
           "tolerance)",
           (long long)mm->id, mm->label, c->time_us, backend, path,
           ctx ? pcuda_describe(ctx) : "cpu-emu", checked, mm->worst);
  if (!ctx) pl_set_gemm_hook(emu_gemm, mm);
  mm->in_use = 1;
  free(src);
  res_reader_close(r);
  *out = mm;
  return LAB_EXIT_OK;
fail:
  free(src);
  res_reader_close(r);
  lab_policy_matmul_close(mm);
  return ex;
}

const char *lab_policy_matmul_describe(const lab_matmul *mm) {
  return mm->desc;
}

int lab_policy_matmul_report(const lab_matmul *mm, char *buf, size_t len) {
  if (mm->ctx) {
    /* pcuda checks the first call of each shape (pcuda_set_matmul) */
    char why[400];
    long long checked = 0;
    if (pcuda_matmul_dropped(mm->ctx, &checked, why, sizeof why)) {
      snprintf(buf, len,
               "kernel %lld (%s) was dropped mid-run: it %s; the default path "
               "took that GEMM and the rest",
               (long long)mm->id, mm->label, why);
      return -1;
    }
    snprintf(buf, len,
             "the policy's GEMMs ran through kernel %lld (%s); the first call "
             "of each of %lld shapes met was checked against the default path",
             (long long)mm->id, mm->label, checked);
    return 0;
  }
  /* the policy checks the first call of each shape (policy/gemm_hook.c) */
  char why[768];
  long long checked = 0;
  if (pl_gemm_hook_dropped(&checked, why, sizeof why)) {
    /* the call that disagreed counts as BLAS's */
    snprintf(buf, len,
             "%lld GEMMs ran through kernel %lld (%s), then it was dropped "
             "mid-run: it %s, a shape the check before the first step did "
             "not cover; BLAS took that GEMM and the rest",
             mm->calls - 1, (long long)mm->id, mm->label, why);
    return -1;
  }
  if (mm->failed)
    snprintf(buf, len,
             "%lld GEMMs ran through kernel %lld (%s), then it was dropped "
             "(%s) and BLAS took the rest",
             mm->calls, (long long)mm->id, mm->label, mm->fail_why);
  else
    snprintf(buf, len,
             "%lld GEMMs ran through kernel %lld (%s); the first call of each "
             "of %lld shapes met was checked against BLAS",
             mm->calls, (long long)mm->id, mm->label, checked);
  return mm->failed ? -1 : 0;
}

void lab_policy_matmul_close(lab_matmul *mm) {
  if (!mm) return;
  if (!mm->ctx)
    pl_set_gemm_hook(NULL, NULL);
  else
    pcuda_set_matmul(mm->ctx, NULL, NULL);
  sbx_matmul_close(mm->srv);
  free(mm->a);
  free(mm->b);
  free(mm->c);
  free(mm->s);
  free(mm);
}
