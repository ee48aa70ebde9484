/*
 * tests/unit/test_gpu_worker.c — the lab's side of a GPU run
 * (sandbox/gpu_exec.c, sbx_run_gpu) against a real run-gpu worker, with or
 * without a device: the worker is exec'd (this test program, as the lab
 * would be), says READY, takes the job and replies in the framing the
 * supervisor expects, outputs and all. Without a device its reply says
 * that CUDA did not initialise (a report, not a crash or a framing error);
 * with one it times cuBLAS at the job's shape. Two jobs of different
 * output sizes, so the reply's length check sees both.
 */
#include "kernels/kernels.h"
#include "sandbox/sandbox.h"
#include "tests/unit/kltest.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void one_job(int device, int n_shapes) {
  kl_run_job job;
  memset(&job, 0, sizeof job);
  job.n_shapes = n_shapes;
  for (int s = 0; s < n_shapes; s++)
    job.shapes[s] = (kl_shape){64 + s, 32, 16};
  job.timed = 1;
  job.timed_shape = (kl_shape){64, 64, 64};
  job.seed = 7;
  job.threads = 1;
  job.max_samples = 10;
  job.time_budget_ms = 50;
  job.deadline_s = 30;
  size_t offs[KL_OUT_SLOTS];
  size_t n_outs = kl_run_output_layout(&job, offs);
  float *outs = calloc(n_outs ? n_outs : 1, sizeof(float));
  kl_run_report *rep = calloc(1, sizeof *rep);
  kl_result *out = calloc(1, sizeof *out);
  if (outs) memset(outs, 0xff, n_outs * sizeof(float));
  int ok = outs && rep && out &&
           sbx_run_gpu(NULL, &job, NULL, 0, rep, outs, n_outs, out) == 1;
  /* the worker's outputs (zeros without a device: it wrote none) replaced
   * what was in the caller's buffer: they came through the memfd */
  size_t changed = 0;
  for (size_t i = 0; ok && !device && i < n_outs; i++)
    changed += outs[i] == 0.0f;
  if (ok && !device)
    CHECK(changed == n_outs, "%zu of %zu outputs came from the worker", changed,
          n_outs);
  CHECK(ok,
        "%d shapes (%zu output floats): the worker's reply was not "
        "complete: status '%s', error '%s'",
        n_shapes, n_outs, out ? out->status : "?", out ? out->error : "?");
  if (ok && !device)
    CHECK(rep->failed && !strncmp(rep->why, "gpu: ", 5),
          "no device: expected a report that CUDA did not initialise, got "
          "failed %d, why '%s'",
          rep->failed, rep->why);
  if (ok && device)
    CHECK(!rep->failed && rep->samples > 0,
          "on the device: cuBLAS at 64^3: failed %d '%s', %d samples",
          rep->failed, rep->why, rep->samples);
  free(outs);
  free(rep);
  free(out);
}

int main(int argc, char **argv) {
  if (argc > 1 && !strcmp(argv[1], "__worker"))
    return sbx_worker_main(argc - 1, argv + 1);
  char why[256], name[128];
  int device = kl_gpu_probe(why, sizeof why, name, sizeof name) == KL_OK;
  printf("test_gpu_worker: %s\n", device ? name : why);
  one_job(device, 0);
  one_job(device, 3);
  return kl_test_done("test_gpu_worker");
}
