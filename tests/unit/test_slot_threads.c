/*
 * tests/unit/test_slot_threads.c — a slot outlives the thread that started
 * its workers. PR_SET_PDEATHSIG kills a worker when the *thread* that
 * spawned it ends, so a slot used by one thread and then another (as the
 * campaign loop does, step after step) must restart its workers instead of
 * failing the next candidate: compile and run both still work.
 */
#include "kernels/kernels.h"
#include "sandbox/sandbox.h"
#include "tests/unit/kltest.h"

#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

static const char src[] =
    "KL_LAUNCH(16, 16, 16, 16, 0);\n"
    "extern \"C\" __global__ void matmul(const float* A, const float* B, "
    "float* C, int M, int N, int K) {\n"
    "  int r = blockIdx.y * 16 + threadIdx.y, c = blockIdx.x * 16 + "
    "threadIdx.x;\n"
    "  if (r >= M || c >= N) return;\n"
    "  float acc = 0.0f;\n"
    "  for (int k = 0; k < K; k++) acc += A[r * K + k] * B[k * N + c];\n"
    "  C[r * N + c] = acc;\n"
    "}\n";

typedef struct job {
  sbx_slot *slot;
  const char *text;
  kl_result r;
} job;

static void *evaluate(void *arg) {
  job *j = arg;
  kl_executor ex;
  sbx_slot_executor(j->slot, &ex);
  kl_eval_options o;
  kl_eval_defaults(&o);
  o.backend = "cpu-emu";
  o.exec = &ex;
  o.shapes[0] = (kl_shape){32, 32, 32};
  o.n_shapes = 1;
  o.seed = 3;
  o.threads = 1;
  o.max_samples = 5;
  o.time_budget_ms = 10;
  kl_eval_source("t.cu", j->text, strlen(j->text), &o, &j->r);
  return NULL;
}

int main(int argc, char **argv) {
  if (argc > 1 && !strcmp(argv[1], "__worker"))
    return sbx_worker_main(argc - 1, argv + 1);
  signal(SIGPIPE, SIG_IGN); /* as the lab does: a dead worker is an error */
  kl_emu_set_launcher(sbx_host_compile_launcher());
  sbx_slot *slot = sbx_slot_new(NULL);
  /* Two texts, so the second is not an NVRTC cache hit: it needs the
   * compile worker the first thread started. */
  static char second[sizeof src + 32];
  snprintf(second, sizeof second, "%s// another text\n", src);
  static job a, b;
  a.slot = b.slot = slot;
  a.text = src;
  b.text = second;
  pthread_t t;
  pthread_create(&t, NULL, evaluate, &a);
  pthread_join(t, NULL); /* its workers get PDEATHSIG now */
  usleep(100000);
  CHECK(a.r.correct, "first thread: %s %s", a.r.status, a.r.error);
  pthread_create(&t, NULL, evaluate, &b);
  pthread_join(t, NULL);
  CHECK(b.r.correct, "second thread, same slot: %s %s", b.r.status, b.r.error);
  sbx_slot_free(slot);
  return kl_test_done("test_slot_threads");
}
