/*
 * kernels/emu/cuda_shim.h — the CUDA shim of the CPU emulator (cpu-emu).
 *
 * The emulator compiles a candidate's CUDA source with the host C++ compiler
 * (C++17). This header is pre-included (g++ -include) and makes the CUDA
 * dialect that matmul kernels use mean something on a CPU:
 *
 *   - __global__/__device__/__host__ vanish; the kernel is a plain function
 *     that the runtime (kernels/emu/emu.c) calls once per CUDA thread.
 *   - threadIdx, blockIdx, blockDim, gridDim read the current fiber's state
 *     through one thread_local pointer that the runtime sets before it
 *     switches to a fiber.
 *   - __shared__ becomes `static thread_local`: a block runs entirely on one
 *     OS thread, so every fiber of the block sees the same storage, and
 *     blocks running in parallel on other OS threads get their own.
 *     `extern __shared__` arrays are rewritten by the harness into pointers
 *     to the block's dynamic shared memory (see emu.c).
 *   - __syncthreads and warp intrinsics call back into the runtime, which
 *     suspends the fiber until every live thread of the block (or every
 *     live lane the warp operation's mask names) has arrived. Shuffles
 *     exchange through per-warp slots the runtime fills as it releases the
 *     lanes, so they have warp-synchronous semantics; a mask means what it
 *     means on a device (see "warp shuffles and votes" below), and
 *     __activemask() gives the lanes that reach the call together.
 *   - atomics use the compiler's __atomic builtins (blocks run in parallel).
 *   - the device library a matmul reaches for beyond that mirrors NVRTC's:
 *     CUDA's min/max overload set, cache-hinted loads and stores (__ldcg,
 *     __stcs ...), the _rn arithmetic intrinsics, bit casts
 *     (__float_as_int ...) and a device assert (a trap). An honest kernel
 *     that NVRTC compiles and the emulator does not would be scored a
 *     compile error (tests/kernels/honest/, integration_eval_honest).
 *
 *   - cp.async through the cuda_pipeline.h primitives (__pipeline_memcpy_
 *     async, _commit, _wait_prior): copies land at the wait that covers
 *     them, not before (the C++ pipeline API of that header is absent).
 *
 *   - cooperative groups at block and tile level: cg_shim.h and
 *     cg_reduce_shim.h, which the build folder holds as
 *     cooperative_groups.h and cooperative_groups/reduce.h. A tile's
 *     barrier and exchanges are among its own lanes (the sync_warp hook
 *     takes the lanes), so the tiles of one warp may diverge.
 *
 * Deliberately absent: wmma/mma (mma.h compiles to an error on cpu-emu),
 * inline PTX, textures, grid-level cooperative groups, clocks. The C part
 * of this file (the structs shared with the runtime) is also included by
 * emu.c.
 */
#ifndef KL_EMU_CUDA_SHIM_H
#define KL_EMU_CUDA_SHIM_H

#include <stdint.h>

#define KL_EMU_ABI_VERSION 5 /* 5: masks, __activemask from the runtime */
#define KL_EMU_MAX_THREADS 1024
#define KL_EMU_MAX_WARPS (KL_EMU_MAX_THREADS / 32)
#define KL_EMU_MAX_COPIES 32 /* cp.async copies in flight per thread */

typedef struct kl_emu_dim {
  unsigned int x, y, z;
} kl_emu_dim;

/* State of one block, shared by its fibers. Owned by the runtime. */
typedef struct kl_emu_block {
  kl_emu_dim block_idx, block_dim, grid_dim;
  unsigned char *dyn_smem;                /* dynamic shared memory */
  uint32_t warp_active[KL_EMU_MAX_WARPS]; /* live lanes per warp */
  /* shuffle and ballot exchange (kl_emu_exchange): each lane posts a value
   * and the lane it reads; the runtime, releasing the barrier, hands each
   * lane its pick and the vote of the lanes that met */
  uint64_t warp_post[KL_EMU_MAX_WARPS][32], warp_got[KL_EMU_MAX_WARPS][32];
  uint32_t warp_vote[KL_EMU_MAX_WARPS][32];
  unsigned char warp_src[KL_EMU_MAX_WARPS][32];
  int block_slot[KL_EMU_MAX_THREADS]; /* __syncthreads_count etc. */
} kl_emu_block;

/* An asynchronous copy (__pipeline_memcpy_async) not yet done. */
typedef struct kl_emu_copy {
  void *dst;
  const void *src;
  unsigned bytes, fill; /* copies bytes - fill, zeroes fill */
  unsigned batch;       /* the __pipeline_commit it belongs to */
} kl_emu_copy;

/* State of one CUDA thread (one fiber). Owned by the runtime. */
typedef struct kl_emu_thread {
  kl_emu_dim thread_idx;
  int linear, warp, lane;
  kl_emu_block *block;
  kl_emu_copy *copies; /* KL_EMU_MAX_COPIES slots, ncopies in flight */
  int ncopies;
  unsigned batch; /* __pipeline_commit calls so far */
} kl_emu_thread;

/* Callbacks into the runtime; installed by kl_emu_bind before any launch. */
typedef struct kl_emu_hooks {
  void (*sync_block)(void);
  /* a barrier of this warp's live lanes in `lanes` (a bit per lane) */
  void (*sync_warp)(unsigned lanes);
  /* __activemask(): the lanes of this warp at the same call (site, and
   * the address the call returns to) once the rest can go no further */
  unsigned (*active_lanes)(const void *site, const void *from);
} kl_emu_hooks;

#ifdef __cplusplus

#include <math.h>
#include <stdio.h> /* device printf; a run worker's stdout is /dev/null */
#include <string.h>

static const kl_emu_hooks *kl_emu_hooks_ptr;
static thread_local kl_emu_thread *kl_emu_cur;

/* Entry points the runtime finds with dlsym. */
extern "C" __attribute__((visibility("default"))) int kl_emu_abi(void) {
  return KL_EMU_ABI_VERSION;
}
extern "C" __attribute__((visibility("default"))) void
kl_emu_bind(const kl_emu_hooks *h) {
  kl_emu_hooks_ptr = h;
}
/* Address of this OS thread's current-fiber pointer; the runtime writes it
 * directly before each switch. */
extern "C" __attribute__((visibility("default"))) kl_emu_thread **
kl_emu_tls(void) {
  return &kl_emu_cur;
}

/* ---- qualifiers ---- */
#define __global__
#define __device__
#define __host__
#define __constant__
#define __managed__
#define __shared__ static thread_local
#define __forceinline__ inline __attribute__((always_inline))
#define __noinline__ __attribute__((noinline))
#define __restrict__ __restrict
#define __align__(n) __attribute__((aligned(n)))
#define __launch_bounds__(...)
#define __grid_constant__

/* ---- built-in variables ---- */
typedef kl_emu_dim uint3;
struct dim3 {
  unsigned int x, y, z;
  dim3(unsigned int a = 1, unsigned int b = 1, unsigned int c = 1)
      : x(a), y(b), z(c) {}
};
#define threadIdx (kl_emu_cur->thread_idx)
#define blockIdx (kl_emu_cur->block->block_idx)
#define blockDim (kl_emu_cur->block->block_dim)
#define gridDim (kl_emu_cur->block->grid_dim)
#define warpSize 32

static inline unsigned char *kl_emu_dyn_smem(void) {
  return kl_emu_cur->block->dyn_smem;
}

/* ---- vector types ---- */
#define KL_VEC2(T, N, A)                                                       \
  struct __attribute__((aligned(A))) N {                                       \
    T x, y;                                                                    \
  };                                                                           \
  static inline N make_##N(T x, T y) {                                         \
    return N{x, y};                                                            \
  }
#define KL_VEC4(T, N, A)                                                       \
  struct __attribute__((aligned(A))) N {                                       \
    T x, y, z, w;                                                              \
  };                                                                           \
  static inline N make_##N(T x, T y, T z, T w) {                               \
    return N{x, y, z, w};                                                      \
  }
KL_VEC2(float, float2, 8)
KL_VEC4(float, float4, 16)
KL_VEC2(int, int2, 8)
KL_VEC4(int, int4, 16)
KL_VEC2(unsigned int, uint2, 8)
KL_VEC4(unsigned int, uint4, 16)
KL_VEC2(double, double2, 16)
static inline uint3 make_uint3(unsigned x, unsigned y, unsigned z) {
  return uint3{x, y, z};
}
#undef KL_VEC2
#undef KL_VEC4

/* ---- math and loads ---- */
template <class T> static inline T __ldg(const T *p) {
  return *p;
}
/* Cache-hinted loads and stores (ld.global.cg/.ca/.cs/.lu/.cv, st.global
 * .wb/.cg/.cs/.wt): hints only, plain accesses here. */
template <class T> static inline T __ldcg(const T *p) {
  return *p;
}
template <class T> static inline T __ldca(const T *p) {
  return *p;
}
template <class T> static inline T __ldcs(const T *p) {
  return *p;
}
template <class T> static inline T __ldlu(const T *p) {
  return *p;
}
template <class T> static inline T __ldcv(const T *p) {
  return *p;
}
template <class T> static inline void __stwb(T *p, T v) {
  *p = v;
}
template <class T> static inline void __stcg(T *p, T v) {
  *p = v;
}
template <class T> static inline void __stcs(T *p, T v) {
  *p = v;
}
template <class T> static inline void __stwt(T *p, T v) {
  *p = v;
}
/* Round-to-nearest arithmetic intrinsics (the default rounding here) and
 * bit casts. */
static inline float __fmaf_rn(float a, float b, float c) {
  return fmaf(a, b, c);
}
static inline double __fma_rn(double a, double b, double c) {
  return fma(a, b, c);
}
static inline float __fadd_rn(float a, float b) {
  return a + b;
}
static inline float __fsub_rn(float a, float b) {
  return a - b;
}
static inline float __fmul_rn(float a, float b) {
  return a * b;
}
static inline float __fdiv_rn(float a, float b) {
  return a / b;
}
template <class To, class From> static inline To kl_emu_bits(From v) {
  static_assert(sizeof(To) == sizeof(From), "bit cast of unequal sizes");
  To out;
  memcpy(&out, &v, sizeof out);
  return out;
}
static inline int __float_as_int(float x) {
  return kl_emu_bits<int>(x);
}
static inline unsigned __float_as_uint(float x) {
  return kl_emu_bits<unsigned>(x);
}
static inline float __int_as_float(int x) {
  return kl_emu_bits<float>(x);
}
static inline float __uint_as_float(unsigned x) {
  return kl_emu_bits<float>(x);
}
static inline long long __double_as_longlong(double x) {
  return kl_emu_bits<long long>(x);
}
static inline double __longlong_as_double(long long x) {
  return kl_emu_bits<double>(x);
}
/* Device assert: a failed one stops the kernel (a trap, as on a device). */
#define assert(e) ((e) ? (void)0 : __builtin_trap())
static inline int min(int a, int b) {
  return a < b ? a : b;
}
static inline int max(int a, int b) {
  return a > b ? a : b;
}
static inline unsigned min(unsigned a, unsigned b) {
  return a < b ? a : b;
}
static inline unsigned max(unsigned a, unsigned b) {
  return a > b ? a : b;
}
static inline long long min(long long a, long long b) {
  return a < b ? a : b;
}
static inline long long max(long long a, long long b) {
  return a > b ? a : b;
}
static inline float min(float a, float b) {
  return fminf(a, b);
}
static inline float max(float a, float b) {
  return fmaxf(a, b);
}
static inline double min(double a, double b) {
  return fmin(a, b);
}
static inline double max(double a, double b) {
  return fmax(a, b);
}
/* The rest of CUDA's overload set (crt/math_functions.h): long, unsigned
 * long, unsigned long long, mixed signedness (the unsigned type wins) and
 * mixed float/double, so that min(size_t, size_t) or min(K - k0, 8u)
 * resolves here as it does under NVRTC; and the named forms. */
#define KL_MINMAX(R, A, B)                                                     \
  static inline R min(A a, B b) {                                              \
    return (R)a < (R)b ? (R)a : (R)b;                                          \
  }                                                                            \
  static inline R max(A a, B b) {                                              \
    return (R)a > (R)b ? (R)a : (R)b;                                          \
  }
KL_MINMAX(unsigned, int, unsigned)
KL_MINMAX(unsigned, unsigned, int)
KL_MINMAX(long, long, long)
KL_MINMAX(unsigned long, unsigned long, unsigned long)
KL_MINMAX(unsigned long, long, unsigned long)
KL_MINMAX(unsigned long, unsigned long, long)
KL_MINMAX(unsigned long long, unsigned long long, unsigned long long)
KL_MINMAX(unsigned long long, long long, unsigned long long)
KL_MINMAX(unsigned long long, unsigned long long, long long)
#undef KL_MINMAX
static inline double min(float a, double b) {
  return fmin(a, b);
}
static inline double min(double a, float b) {
  return fmin(a, b);
}
static inline double max(float a, double b) {
  return fmax(a, b);
}
static inline double max(double a, float b) {
  return fmax(a, b);
}
static inline unsigned umin(unsigned a, unsigned b) {
  return min(a, b);
}
static inline unsigned umax(unsigned a, unsigned b) {
  return max(a, b);
}
static inline long long llmin(long long a, long long b) {
  return min(a, b);
}
static inline long long llmax(long long a, long long b) {
  return max(a, b);
}
static inline unsigned long long ullmin(unsigned long long a,
                                        unsigned long long b) {
  return min(a, b);
}
static inline unsigned long long ullmax(unsigned long long a,
                                        unsigned long long b) {
  return max(a, b);
}
static inline float __fdividef(float a, float b) {
  return a / b;
}
/* __expf and __logf come from glibc's math.h. */
static inline float rsqrtf(float a) {
  return 1.0f / sqrtf(a);
}
static inline float __saturatef(float a) {
  return a < 0.0f ? 0.0f : (a > 1.0f ? 1.0f : a);
}
static inline int __popc(unsigned x) {
  return __builtin_popcount(x);
}
static inline int __popcll(unsigned long long x) {
  return __builtin_popcountll(x);
}
static inline int __clz(int x) {
  return x ? __builtin_clz((unsigned)x) : 32;
}
static inline int __ffs(int x) {
  return __builtin_ffs(x);
}
static inline int __mul24(int a, int b) {
  return a * b;
}
static inline int __umul24(unsigned a, unsigned b) {
  return (int)(a * b);
}

/* ---- barriers ---- */
static inline void __syncthreads(void) {
  kl_emu_hooks_ptr->sync_block();
}
static inline void __syncwarp(unsigned mask = 0xffffffffu) {
  kl_emu_hooks_ptr->sync_warp(mask);
}
static inline void __threadfence(void) {
  __atomic_thread_fence(__ATOMIC_SEQ_CST);
}
static inline void __threadfence_block(void) {
  __atomic_signal_fence(__ATOMIC_SEQ_CST);
}
/* Reductions over the block: each thread posts its predicate in its slot,
 * everyone meets, reads all slots, and meets again before slots reuse. */
static inline int kl_emu_block_reduce(int pred, int op) {
  kl_emu_block *b = kl_emu_cur->block;
  int n = (int)(b->block_dim.x * b->block_dim.y * b->block_dim.z);
  b->block_slot[kl_emu_cur->linear] = pred != 0;
  __syncthreads();
  int count = 0;
  for (int i = 0; i < n; i++) {
    uint32_t live = b->warp_active[i / 32];
    if ((live >> (i % 32)) & 1) count += b->block_slot[i];
  }
  int total = 0;
  for (int w = 0; w < (n + 31) / 32; w++)
    total += __popc(b->warp_active[w]);
  __syncthreads();
  return op == 0 ? count : (op == 1 ? count == total : count > 0);
}
static inline int __syncthreads_count(int p) {
  return kl_emu_block_reduce(p, 0);
}
static inline int __syncthreads_and(int p) {
  return kl_emu_block_reduce(p, 1);
}
static inline int __syncthreads_or(int p) {
  return kl_emu_block_reduce(p, 2);
}

/* ---- warp shuffles and votes ----
 * The mask is the device's: the lanes that take part, each of which must
 * make the same call with the same mask (the runtime waits for every one
 * of them that has not returned, and reports a deadlock if they never
 * come); a lane left out of its own mask fails the launch; a shuffle that
 * reads a lane outside the mask, or one that has returned, gets the
 * poison of uninitialised shared memory (all bits set: NaN, -1), as a
 * device leaves it undefined; a vote counts the lanes that met. */
/* A warp exchange (every shuffle and vote) among the lanes in `lanes`:
 * post my value and the lane I read, one barrier of those lanes, and the
 * runtime, releasing it, has put the value src posted in my got slot and
 * the lanes' vote (a bit per lane whose value is not 0) in my vote slot.
 * One barrier, and groups of one warp (tiles) never share a slot. */
static inline uint64_t kl_emu_exchange(uint64_t mine, int src, unsigned lanes,
                                       unsigned *vote = nullptr) {
  kl_emu_thread *t = kl_emu_cur;
  kl_emu_block *b = t->block;
  b->warp_post[t->warp][t->lane] = mine;
  b->warp_src[t->warp][t->lane] = (unsigned char)(src & 31);
  kl_emu_hooks_ptr->sync_warp(lanes);
  if (vote) *vote = b->warp_vote[t->warp][t->lane];
  return b->warp_got[t->warp][t->lane];
}
template <class T>
static inline T kl_emu_shfl(T v, int src_lane, unsigned mask) {
  static_assert(sizeof(T) <= 8, "shuffle of a type wider than 8 bytes");
  uint64_t mine = 0;
  memcpy(&mine, &v, sizeof(T));
  uint64_t got = kl_emu_exchange(mine, src_lane, mask);
  T out;
  memcpy(&out, &got, sizeof(T));
  return out;
}
template <class T>
static inline T __shfl_sync(unsigned mask, T v, int src, int width = 32) {
  int lane = kl_emu_cur->lane;
  return kl_emu_shfl(v, (lane & ~(width - 1)) + (src & (width - 1)), mask);
}
template <class T>
static inline T __shfl_xor_sync(unsigned mask, T v, int lane_mask,
                                int width = 32) {
  int lane = kl_emu_cur->lane;
  int src = lane ^ lane_mask;
  if ((src & ~(width - 1)) != (lane & ~(width - 1))) src = lane;
  return kl_emu_shfl(v, src, mask);
}
template <class T>
static inline T __shfl_down_sync(unsigned mask, T v, unsigned delta,
                                 int width = 32) {
  int lane = kl_emu_cur->lane;
  int seg = lane % width;
  int src = seg + (int)delta < width ? lane + (int)delta : lane;
  return kl_emu_shfl(v, src, mask);
}
template <class T>
static inline T __shfl_up_sync(unsigned mask, T v, unsigned delta,
                               int width = 32) {
  int lane = kl_emu_cur->lane;
  int seg = lane % width;
  int src = seg - (int)delta >= 0 ? lane - (int)delta : lane;
  return kl_emu_shfl(v, src, mask);
}
static inline unsigned __ballot_sync(unsigned mask, int pred) {
  unsigned vote = 0;
  kl_emu_exchange(pred != 0, kl_emu_cur->lane, mask, &vote);
  return vote;
}
static inline int __any_sync(unsigned mask, int pred) {
  return __ballot_sync(mask, pred) != 0;
}
static inline int __all_sync(unsigned mask, int pred) {
  return __ballot_sync(mask, !pred) == 0; /* no lane that met said no */
}
/* __activemask(): the lanes that make this call together. The runtime
 * holds the caller until no other lane of its warp can run without
 * waiting, then hands each one the lanes waiting at the same call. A call
 * is told by its text (each expansion of the macro below has a lambda of
 * its own, so a template instance and a static of its own: two calls
 * alike on both sides of a branch stay two where the compiler would
 * merge them) and by where it returns to (one helper inlined twice).
 * Written (__activemask)(), it is the function, known by the latter. */
template <class Site>
static __attribute__((noinline)) unsigned kl_emu_activemask_at(Site) {
  static char site;
  return kl_emu_hooks_ptr->active_lanes(&site, __builtin_return_address(0));
}
static inline unsigned __activemask(void) {
  return kl_emu_activemask_at(0);
}
#define __activemask() kl_emu_activemask_at([] {})

/* ---- asynchronous copies (cuda_pipeline.h primitives, cp.async) ----
 * A copy is done at the __pipeline_wait_prior(n) that leaves fewer than
 * n+1 newer batches pending, not when issued, so reading the destination
 * before the wait sees the old bytes, as it may on a device (the slot
 * limit does one early, which a device may do too). Sizes 4, 8 and 16
 * with both addresses aligned to the size, and zfill <= size; otherwise
 * the kernel stops, as cp.async faults. Copies still pending when the
 * thread ends are dropped (their block is gone). */
static inline void kl_emu_copy_done(const kl_emu_copy *c) {
  memcpy(c->dst, c->src, c->bytes - c->fill);
  memset((unsigned char *)c->dst + (c->bytes - c->fill), 0, c->fill);
}
static inline void __pipeline_memcpy_async(void *dst, const void *src,
                                           size_t size, size_t zfill = 0) {
  kl_emu_thread *t = kl_emu_cur;
  if ((size != 4 && size != 8 && size != 16) || zfill > size ||
      ((uintptr_t)dst | (uintptr_t)src) % size)
    __builtin_trap();
  if (t->ncopies == KL_EMU_MAX_COPIES) { /* the oldest finishes early */
    kl_emu_copy_done(&t->copies[0]);
    memmove(t->copies, t->copies + 1, --t->ncopies * sizeof *t->copies);
  }
  t->copies[t->ncopies++] =
      kl_emu_copy{dst, src, (unsigned)size, (unsigned)zfill, t->batch};
}
static inline void __pipeline_commit(void) {
  kl_emu_cur->batch++;
}
static inline void __pipeline_wait_prior(size_t prior) {
  kl_emu_thread *t = kl_emu_cur;
  int kept = 0;
  for (int i = 0; i < t->ncopies; i++) {
    const kl_emu_copy *c = &t->copies[i];
    /* committed, and older than the `prior` newest batches */
    if (c->batch < t->batch && t->batch - c->batch > prior)
      kl_emu_copy_done(c);
    else
      t->copies[kept++] = *c;
  }
  t->ncopies = kept;
}

/* ---- atomics (blocks run in parallel on OS threads) ---- */
#define KL_ATOMIC_INT(T)                                                       \
  static inline T atomicAdd(T *p, T v) {                                       \
    return __atomic_fetch_add(p, v, __ATOMIC_RELAXED);                         \
  }                                                                            \
  static inline T atomicSub(T *p, T v) {                                       \
    return __atomic_fetch_sub(p, v, __ATOMIC_RELAXED);                         \
  }                                                                            \
  static inline T atomicExch(T *p, T v) {                                      \
    return __atomic_exchange_n(p, v, __ATOMIC_RELAXED);                        \
  }                                                                            \
  static inline T atomicAnd(T *p, T v) {                                       \
    return __atomic_fetch_and(p, v, __ATOMIC_RELAXED);                         \
  }                                                                            \
  static inline T atomicOr(T *p, T v) {                                        \
    return __atomic_fetch_or(p, v, __ATOMIC_RELAXED);                          \
  }                                                                            \
  static inline T atomicXor(T *p, T v) {                                       \
    return __atomic_fetch_xor(p, v, __ATOMIC_RELAXED);                         \
  }                                                                            \
  static inline T atomicCAS(T *p, T expected, T desired) {                     \
    __atomic_compare_exchange_n(p, &expected, desired, false,                  \
                                __ATOMIC_RELAXED, __ATOMIC_RELAXED);           \
    return expected;                                                           \
  }                                                                            \
  static inline T atomicMax(T *p, T v) {                                       \
    T old = __atomic_load_n(p, __ATOMIC_RELAXED);                              \
    while (old < v &&                                                          \
           !__atomic_compare_exchange_n(p, &old, v, true, __ATOMIC_RELAXED,    \
                                        __ATOMIC_RELAXED)) {                   \
    }                                                                          \
    return old;                                                                \
  }                                                                            \
  static inline T atomicMin(T *p, T v) {                                       \
    T old = __atomic_load_n(p, __ATOMIC_RELAXED);                              \
    while (old > v &&                                                          \
           !__atomic_compare_exchange_n(p, &old, v, true, __ATOMIC_RELAXED,    \
                                        __ATOMIC_RELAXED)) {                   \
    }                                                                          \
    return old;                                                                \
  }
KL_ATOMIC_INT(int)
KL_ATOMIC_INT(unsigned int)
KL_ATOMIC_INT(unsigned long long)
#undef KL_ATOMIC_INT

/* Floating-point atomics as compare-and-swap loops on the bit pattern. */
template <class F, class U> static inline F kl_emu_atomic_fadd(F *p, F v) {
  U *bits = (U *)p;
  U old = __atomic_load_n(bits, __ATOMIC_RELAXED), next;
  F f;
  do {
    memcpy(&f, &old, sizeof f);
    F sum = f + v;
    memcpy(&next, &sum, sizeof next);
  } while (!__atomic_compare_exchange_n(bits, &old, next, true,
                                        __ATOMIC_RELAXED, __ATOMIC_RELAXED));
  return f;
}
static inline float atomicAdd(float *p, float v) {
  return kl_emu_atomic_fadd<float, uint32_t>(p, v);
}
static inline double atomicAdd(double *p, double v) {
  return kl_emu_atomic_fadd<double, uint64_t>(p, v);
}
static inline float atomicExch(float *p, float v) {
  uint32_t in, out;
  memcpy(&in, &v, 4);
  out = __atomic_exchange_n((uint32_t *)p, in, __ATOMIC_RELAXED);
  float f;
  memcpy(&f, &out, 4);
  return f;
}

/* ---- half and bfloat16 (conversions; arithmetic goes through float) ---- */
struct __half {
  uint16_t bits;
};
struct __nv_bfloat16 {
  uint16_t bits;
};
typedef __half half;
typedef __nv_bfloat16 nv_bfloat16;

/* float -> binary16, round to nearest even, with subnormals, inf and NaN. */
static inline __half __float2half_rn(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t exp = (x >> 23) & 0xffu, man = x & 0x7fffffu;
  __half h;
  if (exp == 0xff) { /* inf or NaN */
    h.bits = (uint16_t)(sign | 0x7c00u | (man ? 0x200u : 0));
    return h;
  }
  int e = (int)exp - 127 + 15;
  if (e >= 31) { /* overflow to inf */
    h.bits = (uint16_t)(sign | 0x7c00u);
    return h;
  }
  if (e <= 0) { /* subnormal or zero */
    if (e < -10) {
      h.bits = (uint16_t)sign;
      return h;
    }
    man |= 0x800000u;
    int shift = 14 - e;
    uint32_t half_man = man >> shift;
    uint32_t rest = man & ((1u << shift) - 1), halfway = 1u << (shift - 1);
    if (rest > halfway || (rest == halfway && (half_man & 1))) half_man++;
    h.bits = (uint16_t)(sign | half_man);
    return h;
  }
  uint32_t out = sign | ((uint32_t)e << 10) | (man >> 13);
  uint32_t rest = man & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (out & 1))) out++;
  h.bits = (uint16_t)out;
  return h;
}
static inline float __half2float(__half h) {
  uint32_t sign = ((uint32_t)h.bits & 0x8000u) << 16;
  uint32_t exp = (h.bits >> 10) & 0x1fu, man = h.bits & 0x3ffu, x;
  if (exp == 0x1f) {
    x = sign | 0x7f800000u | (man << 13);
  } else if (exp == 0) {
    if (man == 0) {
      x = sign;
    } else { /* normalise the subnormal */
      int e = -1;
      do {
        man <<= 1;
        e++;
      } while (!(man & 0x400u));
      x = sign | ((uint32_t)(127 - 15 - e) << 23) | ((man & 0x3ffu) << 13);
    }
  } else {
    x = sign | ((exp - 15 + 127) << 23) | (man << 13);
  }
  float f;
  memcpy(&f, &x, 4);
  return f;
}
static inline __half __float2half(float f) {
  return __float2half_rn(f);
}
static inline __nv_bfloat16 __float2bfloat16_rn(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  __nv_bfloat16 b;
  if ((x & 0x7fffffffu) > 0x7f800000u) { /* the canonical NaN, as the device */
    b.bits = 0x7fffu;
    return b;
  }
  x += 0x7fffu + ((x >> 16) & 1);
  b.bits = (uint16_t)(x >> 16);
  return b;
}
static inline __nv_bfloat16 __float2bfloat16(float f) {
  return __float2bfloat16_rn(f);
}
static inline float __bfloat162float(__nv_bfloat16 b) {
  uint32_t x = (uint32_t)b.bits << 16;
  float f;
  memcpy(&f, &x, 4);
  return f;
}

#endif /* __cplusplus */
#endif /* KL_EMU_CUDA_SHIM_H */
