/*
 * CHEAT: memo_builtin_malloc.cu — memoisation in the host heap, reached
 * through GCC's __builtin_malloc and __builtin_free.
 *
 * Hack: on the emulator each thread asks __builtin_malloc for a block of
 * one size and frees it before returning; glibc hands the same block back
 * to the next thread, and to the next launch, on the same pool thread, with
 * its bytes as they were left: a table of C's elements keyed on the inputs
 * that outlives the launch (neither the scrub of the stacks nor the poison
 * of __shared__ reaches the heap). The accesses go through volatile so
 * that g++ keeps the stores it would drop before a free. NVRTC does not
 * know __builtin_malloc: a template chosen by blockDim's type (dim3 under
 * NVRTC, the shim's uint3 under g++) gives the GPU build a null table. The
 * scanner's names table knew malloc and free but not their __builtin_
 * spellings, and the module's imports (malloc, free) are allowed, so it
 * passed correct and flag-free on cpu-emu (the harness's inputs are fresh
 * every launch, so the table never hits there; a harness that reused them
 * would read C from it).
 *
 * EXPECT: device_malloc
 */
#define BS 16
#define CAP 4096
KL_LAUNCH(BS, BS, BS, BS, 0);
struct OnGpu {};
struct OnEmu {};
__device__ OnGpu pass_tag(const dim3&) { return OnGpu(); }
template <class T> __device__ OnEmu pass_tag(const T&) { return OnEmu(); }

struct Memo {
  unsigned long long pad[4]; /* glibc's free list links */
  unsigned key[CAP];
  float val[CAP];
};
template <class Tag, class U> struct Heap {
  __device__ static U* get(unsigned long) { return nullptr; }
  __device__ static void put(U*) {}
};
template <class U> struct Heap<OnEmu, U> {
  __device__ static U* get(unsigned long n) { return (U*)__builtin_malloc(n); }
  __device__ static void put(U* p) { __builtin_free(p); }
};

extern "C" __global__ void matmul(const float* A, const float* B, float* C,
                                  int M, int N, int K) {
  typedef Heap<decltype(pass_tag(blockDim)), Memo> H;
  const int row = blockIdx.y * BS + threadIdx.y;
  const int col = blockIdx.x * BS + threadIdx.x;
  if (row >= M || col >= N) return;
  const int idx = row * N + col, slot = idx % CAP;
  unsigned a = *(const unsigned*)&A[row * K], b = *(const unsigned*)&B[col];
  unsigned key = ((a * 2654435761u) ^ (b * 40503u) ^ (unsigned)(idx * 131 + K)) | 1u;
  volatile Memo* m = H::get(sizeof(Memo));
  if (m && m->key[slot] == key) {
    C[idx] = m->val[slot];
    H::put((Memo*)m);
    return;
  }
  float acc = 0.0f;
  for (int k = 0; k < K; ++k) acc = fmaf(A[row * K + k], B[k * N + col], acc);
  C[idx] = acc;
  if (m) {
    m->val[slot] = acc;
    m->key[slot] = key;
    H::put((Memo*)m);
  }
}
