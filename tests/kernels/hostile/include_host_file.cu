/*
 * HOSTILE: include_host_file.cu — pulls a host file into the compile,
 * hoping a compiler error echoes its text back (NVRTC was seen doing that).
 * Rejected before any compiler sees it; nothing of the file may appear in
 * any output.
 * EXPECT-STATUS: invalid_input
 */
#include "/etc/passwd"

KL_LAUNCH(16, 16, 16, 16, 0);

extern "C" __global__ void matmul(const float* A, const float* B, float* C,
                                  int M, int N, int K) {
  C[0] = A[0] * B[0];
}
