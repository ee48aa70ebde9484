/*
 * CHEAT: nop_kernel.cu — does nothing at all.
 *
 * Hack: returns at once; on a harness that reuses output memory and ignores
 * the first run, this is the fastest kernel possible.
 *
 * EXPECT: output_not_written
 * EXPECT-VERDICT: wrong
 */
#define BS 16
KL_LAUNCH(BS, BS, BS, BS, 0);

extern "C" __global__ void matmul(const float* A, const float* B, float* C,
                                  int M, int N, int K) {
  (void)A, (void)B, (void)C, (void)M, (void)N, (void)K;
}
