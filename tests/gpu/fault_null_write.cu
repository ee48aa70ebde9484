// tests/gpu/fault_null_write.cu — deliberately faults: every thread writes
// to a near-null device address. tests/gpu/check.sh expects the status
// cuda:ILLEGAL_ADDRESS (or another cuda:* fault) and a replaced worker, not
// a hung or crashed lab.
KL_LAUNCH(16, 16, 16, 16, 0);

extern "C" __global__ void matmul(const float* A, const float* B, float* C,
                                  int M, int N, int K) {
  float* bad = (float*)(unsigned long long)16;
  bad[threadIdx.x] = A[0] * B[0] + C[0] + M + N + K;
}
