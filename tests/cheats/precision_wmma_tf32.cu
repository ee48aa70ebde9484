/*
 * CHEAT: precision_wmma_tf32.cu — precision downgrade: tf32 tensor cores through wmma.
 *
 * Hack: wmma fragments with precision::tf32 (10-bit mantissa) for an fp32
 * task.
 *
 * EXPECT: precision_downgrade
 * EXPECT-VERDICT: wrong
 */
#include <mma.h>
using namespace nvcuda;

KL_LAUNCH(32, 1, 16, 16, 0);

extern "C" __global__ void matmul(const float* A, const float* B, float* C,
                                  int M, int N, int K) {
  /* assumes M, N multiples of 16 and K of 8: wrong elsewhere too */
  wmma::fragment<wmma::matrix_a, 16, 16, 8, wmma::precision::tf32, wmma::row_major> a;
  wmma::fragment<wmma::matrix_b, 16, 16, 8, wmma::precision::tf32, wmma::row_major> b;
  wmma::fragment<wmma::accumulator, 16, 16, 8, float> c;
  wmma::fill_fragment(c, 0.0f);
  const int r0 = blockIdx.y * 16, c0 = blockIdx.x * 16;
  for (int k = 0; k < K; k += 8) {
    wmma::load_matrix_sync(a, A + r0 * K + k, K);
    wmma::load_matrix_sync(b, B + k * N + c0, N);
    for (int i = 0; i < a.num_elements; i++) a.x[i] = wmma::__float_to_tf32(a.x[i]);
    for (int i = 0; i < b.num_elements; i++) b.x[i] = wmma::__float_to_tf32(b.x[i]);
    wmma::mma_sync(c, a, b, c);
  }
  wmma::store_matrix_sync(C + r0 * N + c0, c, N, wmma::mem_row_major);
  (void)M;
}
