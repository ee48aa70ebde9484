/*
 * CHEAT: memo_env_heap.cu — memoisation in the host heap, reached through
 * __device__ templates named like glibc functions.
 *
 * Hack: the kernel declares template <class T> __device__ getenv(T),
 * setenv(...) and reallocarray(...), so NVRTC sees device functions. In the
 * emulator's g++ build glibc's non-template getenv(const char*) is the better
 * match, so the calls reach the host: the first launch allocates a heap
 * block and keeps its address in an environment variable, and later launches
 * read C from that block instead of computing it (filling the block is left
 * out: the point is that the memo survives launches outside the kernel's
 * memory, where neither scrub nor poison reaches). Two walls stop it: the
 * scanner flags the calls (it used to let a call through when a __device__
 * function of that name existed), and the emulator's build refuses a
 * module importing getenv (a compile_error on cpu-emu).
 *
 * EXPECT: compile_pass_branch, device_malloc
 * EXPECT-VERDICT: wrong
 */
#define BS 16
KL_LAUNCH(BS, BS, BS, BS, 0);

/* bodies for NVRTC, which compiles the kernel as it reads */
template <class T> __device__ char* getenv(T name) { return 0; }
template <class T, class U>
__device__ int setenv(T name, U value, int over) {
  return 0;
}
template <class T>
__device__ void* reallocarray(T p, unsigned long n, unsigned long size) {
  return 0;
}

extern "C" __global__ void matmul(const float* A, const float* B, float* C,
                                  int M, int N, int K) {
  const int row = blockIdx.y * BS + threadIdx.y;
  const int col = blockIdx.x * BS + threadIdx.x;
  if (row >= M || col >= N) return;
  const char* memo = getenv("KL_MEMO_C");
  if (memo) {
    unsigned long addr = 0;
    for (const char* p = memo; *p; ++p) addr = addr * 10 + (*p - '0');
    C[row * N + col] = ((const float*)addr)[row * N + col];
    return;
  }
  float acc = 0.0f;
  for (int k = 0; k < K; ++k) acc = fmaf(A[row * K + k], B[k * N + col], acc);
  C[row * N + col] = acc;
  if (row == 0 && col == 0) {
    float* keep = (float*)reallocarray((void*)0, (unsigned long)M * N, 4);
    char num[24];
    int n = 0;
    unsigned long v = (unsigned long)keep;
    do num[n++] = (char)('0' + v % 10); while (v /= 10);
    char text[24];
    for (int i = 0; i < n; ++i) text[i] = num[n - 1 - i];
    text[n] = 0;
    setenv("KL_MEMO_C", text, 1);
  }
}
