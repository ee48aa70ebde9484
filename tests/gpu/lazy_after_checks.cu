// tests/gpu/lazy_after_checks.cu — a cheat for the device check (check.sh
// step 3): an honest naive GEMM for its first launches, which are the
// checks (six shapes and the rerun of the first) and the warm-up, then
// C = 0 for every launch after the ninth, which are timed ones. It counts
// launches in file-scope __device__ memory (the static scanner flags that:
// mutable_device_state); the block that first sees a new launch key (the
// bits of A[0], the shape and C) counts it, the others read the count.
// check.sh expects timed_output_wrong from the launch checks of
// kernels/gpu_run.c (every timed launch verified on inputs of its own)
// and correct false.
KL_LAUNCH(16, 16, 16, 16, 0);

__device__ unsigned long long kl_last_key;
__device__ unsigned int kl_launches;

extern "C" __global__ void matmul(const float* A, const float* B, float* C,
                                  int M, int N, int K) {
  __shared__ unsigned int count;
  if (threadIdx.x == 0 && threadIdx.y == 0) {
    unsigned long long key =
        ((unsigned long long)((const unsigned int*)A)[0] << 32) ^
        (unsigned long long)(M * 131 + N * 7 + K) ^ (unsigned long long)C;
    unsigned long long was = atomicExch(&kl_last_key, key);
    count = was != key ? atomicAdd(&kl_launches, 1u) + 1
                       : atomicAdd(&kl_launches, 0u);
  }
  __syncthreads();
  int row = blockIdx.y * 16 + threadIdx.y, col = blockIdx.x * 16 + threadIdx.x;
  if (row >= M || col >= N) return;
  if (count > 9) {
    C[row * N + col] = 0.0f;
    return;
  }
  float acc = 0.0f;
  for (int k = 0; k < K; k++) acc += A[row * K + k] * B[k * N + col];
  C[row * N + col] = acc;
}
