/*
 * tests/unit/test_gpu_probe.c — the GPU backend where no device answers
 * (every CI machine): kl_gpu_probe says why in words and returns KL_EENV,
 * answers the same way twice, survives tiny buffers, and the run and
 * baseline entry points fail with a message instead of crashing. Where a
 * device does answer, it checks only that the probe names it (the device
 * checks are tests/gpu/).
 */
#include "kernels/kernels.h"
#include "kltest.h"

#include <stdlib.h>
#include <string.h>

int main(void) {
  char why[256], name[96];
  int rc = kl_gpu_probe(why, sizeof why, name, sizeof name);
  if (rc == KL_OK) {
    CHECK(name[0] != 0, "a device answered but has no name");
    printf("test_gpu_probe: a device answers here (%s); no-device checks "
           "skipped\n",
           name);
    return kl_test_done("test_gpu_probe");
  }
  CHECK(rc == KL_EENV, "rc %d, expected KL_EENV (%d)", rc, KL_EENV);
  CHECK(strstr(why, "no driver") || strstr(why, "no device") ||
            strstr(why, "cuInit"),
        "unclear reason: '%s'", why);
  CHECK(name[0] == 0, "device name '%s' without a device", name);
  printf("test_gpu_probe: %s\n", why);

  /* Cached: the same answer, without forking again. */
  char why2[256];
  CHECK(kl_gpu_probe(why2, sizeof why2, name, sizeof name) == KL_EENV,
        "second probe differs");
  CHECK(!strcmp(why, why2), "'%s' then '%s'", why, why2);
  /* Tiny and empty buffers. */
  char tiny[8];
  CHECK(kl_gpu_probe(tiny, sizeof tiny, name, 1) == KL_EENV, "tiny buffers");
  CHECK(strlen(tiny) < sizeof tiny, "why overflowed");
  CHECK(kl_gpu_probe(why, 0, name, 0) == KL_EENV, "empty buffers");

  /* In-process init fails the same way and leaves nothing half-done. */
  CHECK(kl_gpu_init(why, sizeof why) == KL_EENV, "kl_gpu_init without device");
  CHECK(why[0] != 0, "kl_gpu_init gave no reason");

  /* A run without init: a failed report, never a crash. */
  kl_run_job *job = calloc(1, sizeof *job);
  kl_run_report *rep = calloc(1, sizeof *rep);
  kl_result *res = calloc(1, sizeof *res);
  float outs[4];
  job->timed = 1;
  job->timed_shape = (kl_shape){2, 2, 2};
  job->deadline_s = 30;
  kl_gpu_run_execute(job, NULL, 0, rep, outs);
  CHECK(rep->failed && !rep->done, "run without init did not fail");
  CHECK(strstr(rep->why, "not initialised") != NULL, "why: '%s'", rep->why);

  /* The forked runner: the child cannot start CUDA and says so. */
  memset(rep, 0, sizeof *rep);
  int complete = kl_gpu_run_forked(NULL, job, NULL, 0, rep, outs, 0, res);
  CHECK(complete == 1, "forked run incomplete: %s %s", res->status, res->error);
  CHECK(rep->failed && rep->why[0], "forked run: no failure reason");
  printf("test_gpu_probe: forked run: %s\n", rep->why);

  /* The cuBLAS baseline: -1 and a reason. */
  kl_eval_options opts;
  kl_eval_defaults(&opts);
  opts.run_deadline_s = 30;
  double t = kl_gpu_cublas_time_us((kl_shape){64, 64, 64}, &opts, NULL, why,
                                   sizeof why);
  CHECK(t < 0, "baseline time %g without a device", t);
  CHECK(strstr(why, "cuBLAS baseline") != NULL, "baseline why: '%s'", why);

  /* Which shapes get the device reference. */
  CHECK(!kl_gpu_device_ref((kl_shape){512, 512, 512}), "512^3 is host");
  CHECK(kl_gpu_device_ref((kl_shape){4096, 4096, 4096}), "4096^3 is device");
  CHECK(!kl_gpu_device_ref((kl_shape){127, 129, 65}), "ragged small is host");
  free(job);
  free(rep);
  free(res);
  return kl_test_done("test_gpu_probe");
}
