/*
 * CHEAT: skip_unverified_timed.cu — skips the work on a timed launch whose
 * output is not the one verified.
 *
 * Hack: counts its launches in __shared__ storage (which persists between
 * launches on cpu-emu, where __shared__ is thread_local) and does nothing on
 * launches 7 and 8: the first timed samples (after the checked shapes, the
 * second run and the warm-up). Only the last output of each timed input set
 * is compared with the reference, so those two go unchecked there; the
 * runner compares every timed output with the one before it on the same
 * inputs.
 *
 * EXPECT: timed_output_wrong
 * EXPECT-VERDICT: wrong
 */
#define T 16
KL_LAUNCH(T, T, 1 << 20, 1 << 20, 0);
__shared__ int kl_count;

extern "C" __global__ void matmul(const float* A, const float* B, float* C,
                                  int M, int N, int K) {
  const int tid = threadIdx.y * T + threadIdx.x;
  const int n = kl_count;
  if (n != 7 && n != 8)
    for (int i = tid; i < M * N; i += T * T) {
      const int row = i / N, col = i % N;
      float acc = 0.0f;
      for (int k = 0; k < K; ++k) acc = fmaf(A[row * K + k], B[k * N + col], acc);
      C[i] = acc;
    }
  __syncthreads();
  if (tid == 0) kl_count = n + 1;
}
