/*
 * tests/policy_torch_driver.c — the C half of the PyTorch cross-check
 * (tests/python/test_policy_torch.py runs it, then rebuilds the same model
 * in torch from what it wrote and compares).
 *
 * On a tiny config (vocab 64, d 32, 2 layers, 4 heads, d_ff 96, B 4, T 16)
 * it writes one little-endian file:
 *   int32 header[256]: [0] magic 20250901, [1] version 1, [2] V, [3] C,
 *     [4] L, [5] NH, [6] F, [7] max_seq, [8] B, [9] T, [10] steps,
 *     [11] num_params, [12] seed
 *   float ahdr[16]: AdamW lr, beta1, beta2, eps, weight_decay, grad_clip,
 *     warmup_steps, total_steps, final_lr_frac, schedule
 *   float params[num_params]     the init, in pl_params order
 *   int32 tokens[B*T], targets[B*T] (some -1)
 *   float logits[B*T*V], loss
 *   float grads[num_params]      of the mean loss
 *   float w[B*T], wgrads[num_params]  pl_model_backward_weighted(w)
 *   float per step: loss, lr, grad norm (steps x 3), for `steps` AdamW
 *     updates on the same batch (llm.c's test)
 *
 * usage: policy_torch_driver OUT_FILE
 */
#include "policy/policy.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { B = 4, T = 16, STEPS = 10 };

static int put(FILE *f, const void *p, size_t size, size_t n) {
  return fwrite(p, size, n, f) == n ? 0 : -1;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: policy_torch_driver OUT_FILE\n");
    return 2;
  }
  pl_config cfg = {.vocab = 64,
                   .d_model = 32,
                   .n_layers = 2,
                   .n_heads = 4,
                   .d_ff = pl_default_ff(32),
                   .max_seq = 16};
  uint64_t seed = 42;
  char why[256];
  pl_model m;
  if (pl_model_init(&m, &cfg, seed, why, sizeof why) != PL_OK) {
    fprintf(stderr, "policy_torch_driver: %s\n", why);
    return 3;
  }
  pl_set_num_threads(2);
  FILE *f = fopen(argv[1], "wb");
  if (!f) {
    perror(argv[1]);
    return 3;
  }
  pl_adamw_config ac = pl_adamw_defaults();
  ac.lr = 1e-2f;
  ac.warmup_steps = 3;
  ac.total_steps = STEPS;
  ac.final_lr_frac = 0.1f;
  ac.weight_decay = 0.1f;
  ac.grad_clip = 1.0f;
  int32_t hdr[256] = {20250901,
                      1,
                      cfg.vocab,
                      cfg.d_model,
                      cfg.n_layers,
                      cfg.n_heads,
                      cfg.d_ff,
                      cfg.max_seq,
                      B,
                      T,
                      STEPS,
                      (int32_t)m.num_params,
                      (int32_t)seed};
  float ahdr[16] = {ac.lr,
                    ac.beta1,
                    ac.beta2,
                    ac.eps,
                    ac.weight_decay,
                    ac.grad_clip,
                    (float)ac.warmup_steps,
                    (float)ac.total_steps,
                    ac.final_lr_frac,
                    (float)ac.schedule};
  int err = put(f, hdr, 4, 256) | put(f, ahdr, 4, 16) |
            put(f, m.params_memory, 4, m.num_params);

  /* a fixed batch: tokens from a small LCG, targets = next token, with a
   * few positions masked */
  int32_t tokens[B * T], targets[B * T];
  uint32_t s = 1;
  for (int i = 0; i < B * T; i++) {
    s = s * 1664525u + 1013904223u;
    tokens[i] = (int32_t)((s >> 8) % (uint32_t)cfg.vocab);
  }
  for (int i = 0; i < B * T; i++)
    targets[i] = (i % T == T - 1) ? -1 : tokens[i + 1];
  targets[5] = targets[T + 9] = -1;
  err |= put(f, tokens, 4, B * T) | put(f, targets, 4, B * T);

  pl_model_zero_grad(&m);
  float loss = pl_model_forward(&m, tokens, targets, B, T);
  err |=
      put(f, m.acts.logits, 4, (size_t)B * T * cfg.vocab) | put(f, &loss, 4, 1);
  pl_model_backward(&m);
  err |= put(f, m.grads_memory, 4, m.num_params);

  /* GRPO-like weights: advantages of both signs, some zero */
  float w[B * T];
  for (int i = 0; i < B * T; i++)
    w[i] = (float)((i * 37) % 11 - 5) / (float)(B * T);
  pl_model_zero_grad(&m);
  pl_model_backward_weighted(&m, w);
  err |= put(f, w, 4, B * T) | put(f, m.grads_memory, 4, m.num_params);

  pl_adamw opt;
  if (pl_adamw_init(&opt, &m, &ac, why, sizeof why) != PL_OK) {
    fprintf(stderr, "policy_torch_driver: %s\n", why);
    return 3;
  }
  for (int step = 0; step < STEPS; step++) {
    pl_model_zero_grad(&m);
    float rec[3];
    rec[0] = pl_model_forward(&m, tokens, targets, B, T);
    pl_model_backward(&m);
    rec[1] = pl_adamw_lr_at(&ac, opt.step);
    rec[2] = pl_adamw_step(&opt, &m);
    printf("step %d: loss %.6f lr %.6f norm %.6f\n", step, rec[0], rec[1],
           rec[2]);
    err |= put(f, rec, 4, 3);
  }
  if (fclose(f) || err) {
    fprintf(stderr, "policy_torch_driver: writing %s failed\n", argv[1]);
    return 3;
  }
  pl_adamw_free(&opt);
  pl_model_free(&m);
  return 0;
}
