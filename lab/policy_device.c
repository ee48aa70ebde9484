/*
 * lab/policy_device.c — --policy-device and --policy-dtype for `kernlab
 * prime`, `run` and `generate`: each call goes to the policy's CUDA runtime
 * when the lab opened a device, else to the CPU model (lab/policy_device.h says
 * why the CPU model stays the one of record).
 *
 * The device is opened through pcuda_device_open (the driver and cuBLAS
 * are dlopen'd, so kernlab links no CUDA library and runs the same without
 * one). The lab process then holds a CUDA context while it forks the
 * sandbox's workers: they exec at once and never touch CUDA, which is what
 * the driver allows. One fork does touch CUDA without exec: kl_gpu_probe's
 * child (kernels/gpu.c), which the candidates' backend resolution runs. So
 * the probe runs here first, before this process initialises CUDA; its
 * answer is cached, and every later backend resolution reads the cache
 * instead of forking a child that would inherit an initialised driver
 * (which CUDA does not support: the child's cuInit fails, and `--backend
 * auto` would quietly fall back to the emulator).
 */
#include "lab/policy_device.h"
#include "lab/lab.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

int lab_policy_device_parse(const char *arg) {
  if (!arg) return -1;
  if (!strcmp(arg, "cpu")) return LAB_POLICY_CPU;
  if (!strcmp(arg, "gpu")) return LAB_POLICY_GPU;
  if (!strcmp(arg, "auto")) return LAB_POLICY_AUTO;
  return -1;
}

int lab_policy_dtype_parse(const char *arg) {
  if (!arg) return -1;
  if (!strcmp(arg, "fp32")) return PCUDA_DTYPE_FP32;
  if (!strcmp(arg, "bf16")) return PCUDA_DTYPE_BF16;
  return -1;
}

int lab_policy_dtype_resolve(int dtype, int mode, const pcuda_ctx *ctx,
                             int with_matmul, const char *cmd, int *out,
                             char *why, size_t whylen) {
  *out = PCUDA_DTYPE_FP32;
  if (dtype != PCUDA_DTYPE_BF16) return LAB_EXIT_OK;
  if (with_matmul) {
    snprintf(why, whylen,
             "--policy-dtype bf16 with --policy-matmul: the candidate kernel "
             "stands in for the policy's fp32 GEMMs, and bf16 has none; use "
             "one or the other");
    return LAB_EXIT_USAGE;
  }
  if (!ctx && mode == LAB_POLICY_CPU) {
    snprintf(
        why, whylen,
        "--policy-dtype bf16 needs the policy on a device (--policy-device "
        "gpu or auto); the CPU policy is fp32");
    return LAB_EXIT_USAGE;
  }
  if (!ctx) {
    fprintf(stderr,
            "%s: --policy-dtype bf16: no device for the policy; the CPU "
            "policy runs in fp32\n",
            cmd);
    return LAB_EXIT_OK;
  }
  fprintf(stderr,
          "%s: --policy-dtype bf16: bf16 GEMM operands, fp32 master weights\n",
          cmd);
  *out = PCUDA_DTYPE_BF16;
  return LAB_EXIT_OK;
}

int lab_policy_device_open(int mode, const char *cmd, pcuda_ctx **ctx,
                           char *why, size_t whylen) {
  *ctx = NULL;
  if (mode == LAB_POLICY_CPU) return LAB_EXIT_OK;
  char reason[256], dev[128];
  (void)kl_gpu_probe(reason, sizeof reason, dev, sizeof dev);
  if (pcuda_device_open(ctx, PCUDA_GEMM_AUTO, reason, sizeof reason) == PL_OK) {
    fprintf(stderr, "%s: policy on %s\n", cmd, pcuda_describe(*ctx));
    return LAB_EXIT_OK;
  }
  if (mode == LAB_POLICY_GPU) {
    snprintf(why, whylen,
             "--policy-device gpu: no device for the policy: %s (use "
             "--policy-device cpu or auto)",
             reason);
    return LAB_EXIT_ENV;
  }
  fprintf(stderr,
          "%s: --policy-device auto: no device for the policy (%s); the "
          "policy runs on the CPU\n",
          cmd, reason);
  return LAB_EXIT_OK;
}

int lab_policy_open(int mode, int dtype, int with_matmul, const char *cmd,
                    pcuda_ctx **ctx, int *dtype_out, char *why, size_t whylen) {
  int ex = lab_policy_device_open(mode, cmd, ctx, why, whylen);
  if (ex != LAB_EXIT_OK) return ex;
  ex = lab_policy_dtype_resolve(dtype, mode, *ctx, with_matmul, cmd, dtype_out,
                                why, whylen);
  if (ex != LAB_EXIT_OK && *ctx) {
    pcuda_close(*ctx);
    *ctx = NULL;
  }
  return ex;
}

int lab_policy_init(lab_policy *p, pcuda_ctx *ctx, int dtype, pl_model *m,
                    pl_adamw *opt, pl_model *ref, char *why, size_t whylen) {
  memset(p, 0, sizeof *p);
  p->m = m;
  p->opt = opt;
  p->ref = ref;
  p->ctx = ctx;
  snprintf(p->desc, sizeof p->desc, "cpu");
  if (!ctx) {
    if (dtype == PCUDA_DTYPE_FP32) return LAB_EXIT_OK;
    snprintf(why, whylen, "%s GEMMs need the policy on a device",
             pcuda_dtype_name(dtype));
    return LAB_EXIT_USAGE;
  }
  snprintf(p->desc, sizeof p->desc, "%s, %s GEMMs", pcuda_describe(ctx),
           pcuda_dtype_name(dtype));
  int rc = pcuda_model_init_dtype(&p->dm, ctx, m, dtype, why, whylen);
  if (!rc && ref)
    rc = pcuda_model_init_dtype(&p->dref, ctx, ref, dtype, why, whylen);
  if (!rc && opt) {
    rc = pcuda_adamw_init(&p->dopt, &p->dm, &opt->cfg, why, whylen);
    if (!rc) {
      size_t bytes = opt->n * sizeof(float);
      pcuda_upload(ctx, p->dopt.m, opt->m, bytes);
      pcuda_upload(ctx, p->dopt.v, opt->v, bytes);
      p->dopt.step = opt->step;
      rc = pcuda_status(ctx, why, whylen);
    }
  }
  return rc ? LAB_EXIT_ENV : LAB_EXIT_OK;
}

void lab_policy_close(lab_policy *p) {
  if (p->ctx) {
    /* the arena's account: how much device memory the policy needed, and
     * how few backend allocations it took (pcuda.h, pcuda_mem_stats) */
    pcuda_mem_stats st;
    pcuda_mem_stats_get(p->ctx, &st);
    fprintf(stderr,
            "policy device memory: peak %.1f MiB in use, %.1f MiB held in %d "
            "chunks; %lu buffers from %lu backend allocations\n",
            st.peak / 1048576.0, st.reserved / 1048576.0, st.chunks, st.allocs,
            st.backend_allocs);
    pcuda_adamw_free(&p->dopt);
    pcuda_model_free(&p->dref);
    pcuda_model_free(&p->dm);
    pcuda_close(p->ctx);
  }
  memset(p, 0, sizeof *p);
}

int lab_policy_batch_room(lab_policy *p, int B, int T, double *need,
                          double *room, char *why, size_t whylen) {
  const int models = p->ref ? 2 : 1; /* the reference has its own */
  if (p->ctx) {
    *need = pcuda_model_batch_bytes(&p->m->cfg, p->dm.dtype, B, T) * models;
    return pcuda_mem_room(p->ctx, room, why, whylen);
  }
  *need = pl_model_acts_bytes(&p->m->cfg, B, T) * models;
  *room = (double)sysconf(_SC_PHYS_PAGES) * sysconf(_SC_PAGESIZE);
  return PL_OK;
}

const char *lab_policy_describe(const lab_policy *p) {
  return p->desc[0] ? p->desc : "cpu";
}

float lab_policy_forward(lab_policy *p, int use_ref, const int32_t *tokens,
                         const int32_t *targets, int B, int T,
                         const float **losses) {
  if (p->ctx) {
    pcuda_model *dm = use_ref ? &p->dref : &p->dm;
    float loss = pcuda_model_forward(dm, tokens, targets, B, T);
    *losses = dm->host_scratch;
    return loss;
  }
  pl_model *m = use_ref ? p->ref : p->m;
  float loss = pl_model_forward(m, tokens, targets, B, T);
  *losses = m->acts.losses;
  return loss;
}

void lab_policy_zero_grad(lab_policy *p) {
  if (p->ctx)
    pcuda_model_zero_grad(&p->dm);
  else
    pl_model_zero_grad(p->m);
}

int lab_policy_backward(lab_policy *p, const float *dloss_dlogp) {
  if (p->ctx)
    return dloss_dlogp ? pcuda_model_backward_weighted(&p->dm, dloss_dlogp)
                       : pcuda_model_backward(&p->dm);
  return dloss_dlogp ? pl_model_backward_weighted(p->m, dloss_dlogp)
                     : pl_model_backward(p->m);
}

float lab_policy_step(lab_policy *p) {
  if (!p->ctx) return pl_adamw_step(p->opt, p->m);
  float norm = pcuda_adamw_step(&p->dopt, &p->dm);
  p->opt->step = p->dopt.step;
  return norm;
}

int lab_policy_sync(lab_policy *p, char *why, size_t whylen) {
  if (!p->ctx) return PL_OK;
  pcuda_model_get_params(&p->dm, p->m->params_memory);
  if (p->opt) {
    size_t bytes = p->opt->n * sizeof(float);
    pcuda_download(p->ctx, p->opt->m, p->dopt.m, bytes);
    pcuda_download(p->ctx, p->opt->v, p->dopt.v, bytes);
    p->opt->step = p->dopt.step;
  }
  return pcuda_status(p->ctx, why, whylen);
}

int lab_policy_generate(lab_policy *p, const int32_t *prompt, int prompt_len,
                        int G, int max_new, int eos_id,
                        const pl_sampling *sampling, uint64_t seed,
                        pl_generation *out, pl_row_done_fn on_row, void *ctx,
                        char *why, size_t whylen) {
  if (p->ctx)
    return pcuda_generate_notify(&p->dm, prompt, prompt_len, G, max_new, eos_id,
                                 sampling, seed, out, on_row, ctx, why, whylen);
  return pl_generate_notify(p->m, prompt, prompt_len, G, max_new, eos_id,
                            sampling, seed, out, on_row, ctx, why, whylen);
}
