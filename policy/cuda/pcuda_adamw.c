/*
 * policy/cuda/pcuda_adamw.c — AdamW on a CUDA backend: policy/adamw.c's
 * pl_adamw_step with the per-element work in adamw_kernel
 * (policy/cuda/adamw.cu). The schedule (pl_adamw_lr_at), the clip factor
 * and the bias corrections are computed on the host by the CPU's code and
 * expressions, so both sides feed the kernel the same floats; weight decay
 * follows pl_param_decays tensor by tensor. State (m, v) is one device
 * allocation. A bf16 model (pcuda_model_init_dtype) is updated the same
 * way, in fp32 on its fp32 master weights, and then its bf16 copy is
 * refreshed from them (pcuda_model_cast_params).
 */
#include "policy/cuda/pcuda_internal.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define NORM_THREADS 256u
#define NORM_MAX_BLOCKS 256u /* partial sums of the gradient norm */

int pcuda_adamw_init(pcuda_adamw *opt, pcuda_model *dm,
                     const pl_adamw_config *cfg, char *why, size_t whylen) {
  memset(opt, 0, sizeof *opt);
  /* The CPU's own check (and message): pl_adamw_init on a one-parameter
   * stand-in for the model, which is all it reads. */
  pl_model stand_in;
  memset(&stand_in, 0, sizeof stand_in);
  stand_in.num_params = 1;
  pl_adamw check;
  int rc = pl_adamw_init(&check, &stand_in, cfg, why, whylen);
  if (rc != PL_OK) return rc;
  pl_adamw_free(&check);

  pcuda_ctx *ctx = dm->ctx;
  opt->ctx = ctx;
  opt->cfg = *cfg;
  opt->n = dm->num_params;
  opt->state_memory = pcuda_alloc(ctx, 2 * opt->n * sizeof(float));
  opt->norm_scratch = pcuda_alloc(ctx, (NORM_MAX_BLOCKS + 1) * sizeof(double));
  pcuda_zero(ctx, opt->state_memory, 2 * opt->n * sizeof(float));
  rc = pcuda_status(ctx, why, whylen);
  if (rc != PL_OK) {
    pcuda_free(ctx, opt->state_memory);
    pcuda_free(ctx, opt->norm_scratch);
    memset(opt, 0, sizeof *opt);
    return rc;
  }
  opt->m = opt->state_memory;
  opt->v = opt->state_memory + opt->n;
  return PL_OK;
}

void pcuda_adamw_free(pcuda_adamw *opt) {
  if (opt->ctx) {
    pcuda_free(opt->ctx, opt->state_memory);
    pcuda_free(opt->ctx, opt->norm_scratch);
  }
  memset(opt, 0, sizeof *opt);
}

/* The global L2 norm of grads (n): per-block partial sums of squares in
 * double, then one block adds them up; one double comes back. */
static double global_norm_squared(pcuda_ctx *ctx, double *scratch,
                                  const float *grads, size_t n) {
  unsigned blocks = pcuda_blocks(n, NORM_THREADS);
  if (blocks > NORM_MAX_BLOCKS) blocks = NORM_MAX_BLOCKS;
  double *partial = scratch, *total = scratch + NORM_MAX_BLOCKS;
  int n_partial = (int)blocks;
  void *args[] = {&partial, &grads, &n};
  pcuda_launch(ctx, PCUDA_K_global_norm_squared_kernel,
               (pcuda_dim){blocks, 1, 1}, (pcuda_dim){NORM_THREADS, 1, 1}, 0,
               args);
  void *rargs[] = {&total, &partial, &n_partial};
  pcuda_launch(ctx, PCUDA_K_global_norm_reduce_kernel, (pcuda_dim){1, 1, 1},
               (pcuda_dim){NORM_THREADS, 1, 1}, 0, rargs);
  double sq = NAN;
  pcuda_download(ctx, &sq, total, sizeof sq);
  return sq;
}

float pcuda_adamw_step(pcuda_adamw *opt, pcuda_model *dm) {
  const pl_adamw_config *c = &opt->cfg;
  pcuda_ctx *ctx = dm->ctx;
  const float *grads = dm->grads_memory;
  float *params = dm->params_memory;

  /* the global L2 norm; clip like clip_grad_norm_ (adamw.c's expressions) */
  float norm =
      (float)sqrt(global_norm_squared(ctx, opt->norm_scratch, grads, opt->n));
  float clip = 1.0f;
  if (c->grad_clip > 0.0f && norm > c->grad_clip)
    clip = c->grad_clip / (norm + 1e-6f);

  float lr = pl_adamw_lr_at(c, opt->step);
  opt->step++;
  float bc1 = 1.0f - powf(c->beta1, (float)opt->step);
  float bc2 = 1.0f - powf(c->beta2, (float)opt->step);
  float beta1 = c->beta1, beta2 = c->beta2, eps = c->eps;
  size_t off = 0;
  for (int t = 0; t < PL_NUM_PARAM_TENSORS; t++) {
    float wd = pl_param_decays(t) ? c->weight_decay : 0.0f;
    size_t n = dm->param_sizes[t];
    float *p_t = params + off, *m_t = opt->m + off, *v_t = opt->v + off;
    const float *g_t = grads + off;
    void *args[] = {&p_t,   &g_t, &m_t, &v_t, &n,  &lr,  &beta1,
                    &beta2, &bc1, &bc2, &eps, &wd, &clip};
    pcuda_launch(ctx, PCUDA_K_adamw_kernel,
                 (pcuda_dim){pcuda_blocks(n, 256u), 1, 1},
                 (pcuda_dim){256u, 1, 1}, 0, args);
    off += n;
  }
  /* a bf16 model: its GEMMs read the bf16 copy of the updated master */
  pcuda_model_cast_params(dm);
  char why[256];
  if (pcuda_status(ctx, why, sizeof why) != PL_OK) {
    fprintf(stderr, "pcuda_adamw_step: %s\n", why);
    return NAN;
  }
  return norm;
}
