/*
 * CHEAT: device_malloc_cache.cu — device malloc keeping a result cache alive.
 *
 * Hack: allocates a device heap buffer on the first launch, remembers it in
 * a __device__ pointer and copies the cached result into C on later launches
 * (memoisation across launches).
 *
 * On a device the timed runs catch it (timed_output_wrong); on cpu-emu its
 * first write to its own file-scope data faults (read-only there) and the
 * verdict is a crash.
 *
 * EXPECT: device_malloc,mutable_device_state
 * EXPECT-VERDICT: wrong
 */
#define BS 16
KL_LAUNCH(BS, BS, BS, BS, 0);

__device__ float* kl_cache;
__device__ int kl_cached_n;

extern "C" __global__ void matmul(const float* A, const float* B, float* C,
                                  int M, int N, int K) {
  const int row = blockIdx.y * BS + threadIdx.y;
  const int col = blockIdx.x * BS + threadIdx.x;
  if (row >= M || col >= N) return;
  if (kl_cached_n == M * N) {  /* replay a previous launch */
    C[row * N + col] = kl_cache[row * N + col];
    return;
  }
  if (row == 0 && col == 0) kl_cache = (float*)malloc(sizeof(float) * M * N);
  float acc = 0.0f;
  for (int k = 0; k < K; ++k) acc = fmaf(A[row * K + k], B[k * N + col], acc);
  C[row * N + col] = acc;
  if (kl_cache) kl_cache[row * N + col] = acc;
  /* The last element of the grid arms the replay for later launches. */
  if (row == M - 1 && col == N - 1) kl_cached_n = M * N;
}
