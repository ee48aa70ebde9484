/*
 * kernels/emu/emu_run.c — the CPU emulator's runtime: runs a grid of CUDA
 * blocks on OS threads, each block's threads as fibers.
 *
 * How a launch runs:
 *   - Blocks are handed out through an atomic counter to `threads` OS
 *     threads (all cores by default). A block runs start to end on one OS
 *     thread, which is why `static thread_local` works as __shared__.
 *     Before each launch every OS thread fills the candidate's
 *     thread-local block with 0xFF (poison_shared), dynamic shared memory
 *     too, and its stack: 64 KiB below and the deeper pages a kernel ever
 *     touched (fiber-less kernels), or the pages of the fiber stacks a
 *     kernel ever touched. Shared memory and
 *     uninitialised locals start undefined, not as the last launch left
 *     them (a memo).
 *   - Inside a block the scheduler resumes each runnable fiber in turn
 *     (thread 0 first, or the last first when asked: kl_emu_set_reverse,
 *     emu_launch.h's reverse); a fiber runs until it reaches a barrier or
 *     ends. Fiber-less blocks call their threads in the same order.
 * __syncthreads waits for every live thread of the block, warp barriers
 * (shuffles, __syncwarp, votes) for every live lane their mask names (all
 * 32, a cooperative-groups tile's, or a kernel's partial mask), each with
 * the same mask, and the runtime hands out the exchange as it releases
 * them (warp_try_release): a read from a lane outside the mask, or gone,
 * is poison, and a lane left out of its own mask fails the launch
 * (mask_leaves_out). __activemask() waits until no other lane of the warp
 * can run and gives the lanes at the same call (active_try_release). A
 * thread that has returned no longer counts, as on hardware. A state where
 * no fiber can run while some still live is a deadlock (a barrier some
 * threads never reach while others wait at a different kind, or lanes a
 * mask names that never meet it) and fails the launch, saying which.
 *   - In the reversed check run (kl_emu_set_reverse), the threads of two
 *     blocks drawn from the check's seed see between barriers only their
 *     own writes and a fixed half of the others' (iso_begin): a race that
 *     every whole-interval order hides shows there.
 *   - Kernels whose source names no barrier or warp intrinsic run without
 *     fibers: each thread is a plain call. If such a kernel reaches a
 *     barrier anyway (hidden behind a macro), the launch is repeated with
 *     fibers on a re-poisoned output.
 *   - Besides a candidate's matmul (kl_emu_run), any kernel compiled into
 *     this binary against the shim runs through kl_emu_launch
 *     (kernels/emu/emu_launch.h): any grid and block (x, y, z), dynamic
 *     shared memory, and a trampoline that calls the kernel with its
 *     arguments. The policy's CUDA kernels are tested this way.
 *
 * Not here: compiling the candidate (emu_build.c), checking results
 * (check.c), isolation from hostile code (the sandbox module).
 */
#define _GNU_SOURCE
#include "kernels/emu/emu_internal.h"
#include "kernels/emu/emu_launch.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdint.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define KL_ASAN 1

/* ASan's defaults for every program that runs the emulator (read before
 * ASAN_OPTIONS, which still adds to them). intercept_tls_get_addr=0: the
 * candidates are dlopen'd modules with thread-local storage, and GCC 12's
 * sanitizer runtime misreads a dynamic TLS block whose address happens to
 * sit at a glibc-2.19 header's offset in its page (google/sanitizers
 * #1322): LeakSanitizer's exit-time scan then reads a garbage range and
 * dies ("Tracer caught signal 11"), as test_emu did whenever its first
 * launch was test_reverse_order's. The emulator's threads keep nothing
 * only in dynamic TLS, so the scan loses nothing it needs. */
const char *__asan_default_options(void);
const char *__asan_default_options(void) {
  return "intercept_tls_get_addr=0";
}
#endif

enum { F_RUN, F_WAIT_BLOCK, F_WAIT_WARP, F_WAIT_ACTIVE, F_DONE };

/* What a shuffle reads from a lane outside its mask: the bytes
 * poison_shared fills shared memory with (a NaN float, a -1 int). */
#define KL_EMU_POISON UINT64_MAX

typedef struct fiber {
  void *sp;
  int state;
  uint32_t wait_lanes;     /* F_WAIT_WARP: the warp's lanes it waits with */
  const void *site, *from; /* F_WAIT_ACTIVE: the __activemask call */
  kl_emu_thread t;
} fiber;

/* One OS thread of a launch and everything its blocks need. */
typedef struct worker {
  kl_emu_module *m; /* NULL for a generic launch */
  const float *A, *B;
  float *C;
  int M, N, K;
  void (*entry)(void *); /* generic launch: the trampoline and its argument */
  void *entry_arg;
  kl_emu_thread **(*tls_of)(void); /* the program's current-fiber slot */
  kl_emu_copy *copies; /* cp.async slots, KL_EMU_MAX_COPIES a thread */
  kl_emu_dim grid, block_dim;
  int nthreads; /* CUDA threads per block */
  int use_fibers;
  int reverse; /* resume fibers from the highest thread down (emu_launch.h) */

  fiber *fibers;
  unsigned char *stacks; /* nthreads stacks, each behind a guard page */
  int stacks_cached;     /* owned by stack_cache: not unmapped after */
  size_t stack_size;
  void *sched_sp;
#ifdef KL_ASAN
  /* the scheduler's (this pool thread's own) stack, as ASan reported it
   * when a fiber was first entered: every switch back to the scheduler
   * names it, or ASan would take the thread's stack to be [0, 0) */
  const void *sched_stack_lo;
  size_t sched_stack_size;
#endif
  int cur;
  int live, arrived_block;
  uint32_t arrived_lanes[KL_EMU_MAX_WARPS]; /* lanes at a warp barrier */
  uint32_t active_lanes[KL_EMU_MAX_WARPS];  /* lanes at __activemask */
  kl_emu_block block;
  unsigned char *dyn_smem;
  kl_emu_thread **tls;

  /* the reversed check run isolates two blocks (iso_begin): their linear
   * indices, or -1 */
  int64_t iso_block[2];
  struct iso {
    unsigned char *reg[2]; /* the module's thread-local block, dyn smem */
    size_t words[2], n;    /* 4-byte words in each, in all */
    uint32_t *S, *P, *before, *cur;
    int32_t *W; /* the thread whose write P holds, -1 none */
    int on;
  } iso;
  size_t dyn_bytes;

  int barrier_without_fibers; /* a barrier ran in fiber-less mode */
  int failed;
  char why[512];
  struct launch *launch;
} worker;

typedef struct launch {
  int next_block; /* atomic */
  int total_blocks;
  int stop; /* atomic: a worker failed */
} launch;

static _Thread_local worker *tl_worker;

#define KL_FIBER_STACK (128 * 1024)

/* ---- hooks called from candidate code ---- */

/* Suspends the current fiber in `state` and returns to the scheduler. */
static void fiber_wait(int state) {
  worker *w = tl_worker;
  if (!w->use_fibers) {
    w->barrier_without_fibers = 1;
    return;
  }
  fiber *f = &w->fibers[w->cur];
  f->state = state;
#ifdef KL_ASAN
  void *fake = NULL;
  __sanitizer_start_switch_fiber(&fake, w->sched_stack_lo, w->sched_stack_size);
  kl_fiber_switch(&f->sp, w->sched_sp);
  __sanitizer_finish_switch_fiber(fake, &w->sched_stack_lo,
                                  &w->sched_stack_size);
#else
  kl_fiber_switch(&f->sp, w->sched_sp);
#endif
}
static void hook_sync_block(void) {
  fiber_wait(F_WAIT_BLOCK);
}
/* A barrier of the lanes of this warp in `lanes` (all 32: __syncwarp and
 * the warp intrinsics; a tile's: cooperative groups' thread_block_tile). */
static void hook_sync_warp(unsigned lanes) {
  worker *w = tl_worker;
  if (w->use_fibers) w->fibers[w->cur].wait_lanes = lanes;
  fiber_wait(F_WAIT_WARP);
}

/* __activemask() at `site` (the call's own object) returning to `from`:
 * the lanes of this warp waiting at the same call once no other lane of
 * it can run (active_try_release). Without fibers the launch is repeated
 * with them, so the answer does not matter. */
static unsigned hook_active_lanes(const void *site, const void *from) {
  worker *w = tl_worker;
  if (!w->use_fibers) {
    w->barrier_without_fibers = 1;
    return 0xffffffffu;
  }
  fiber *f = &w->fibers[w->cur];
  f->site = site;
  f->from = from;
  fiber_wait(F_WAIT_ACTIVE);
  return w->block.warp_vote[f->t.warp][f->t.lane];
}

const kl_emu_hooks kl_emu_runtime_hooks = {hook_sync_block, hook_sync_warp,
                                           hook_active_lanes};

/* One CUDA thread's run of the kernel: the candidate's matmul, or a
 * generic launch's trampoline. */
static void run_kernel(worker *w) {
  if (w->entry)
    w->entry(w->entry_arg);
  else
    w->m->kernel(w->A, w->B, w->C, w->M, w->N, w->K);
}

/* First frame of every fiber: run the kernel, then leave for good. */
static void fiber_entry(void) {
  worker *w = tl_worker;
#ifdef KL_ASAN
  __sanitizer_finish_switch_fiber(NULL, &w->sched_stack_lo,
                                  &w->sched_stack_size);
#endif
  run_kernel(w);
  w = tl_worker;
  fiber *f = &w->fibers[w->cur];
  f->state = F_DONE;
#ifdef KL_ASAN
  /* NULL: this fiber's fake stack is freed, it never runs again */
  __sanitizer_start_switch_fiber(NULL, w->sched_stack_lo, w->sched_stack_size);
#endif
  kl_fiber_switch(&f->sp, w->sched_sp);
  abort(); /* unreachable: a finished fiber is never resumed */
}

/* ---- the block scheduler ---- */

static void init_block_state(worker *w, int bx, int by, int bz) {
  kl_emu_block *b = &w->block;
  b->block_idx = (kl_emu_dim){(unsigned)bx, (unsigned)by, (unsigned)bz};
  b->block_dim = w->block_dim;
  b->grid_dim = w->grid;
  b->dyn_smem = w->dyn_smem;
  int nwarps = (w->nthreads + 31) / 32;
  for (int i = 0; i < nwarps; i++) {
    int lanes = w->nthreads - i * 32 < 32 ? w->nthreads - i * 32 : 32;
    b->warp_active[i] = lanes == 32 ? 0xffffffffu : ((1u << lanes) - 1);
    w->arrived_lanes[i] = 0;
    w->active_lanes[i] = 0;
  }
  for (int i = 0; i < w->nthreads; i++) {
    kl_emu_thread *t = &w->fibers[i].t;
    unsigned plane = w->block_dim.x * w->block_dim.y;
    t->thread_idx = (kl_emu_dim){(unsigned)i % w->block_dim.x,
                                 (unsigned)i / w->block_dim.x % w->block_dim.y,
                                 (unsigned)i / plane};
    t->linear = i;
    t->warp = i / 32;
    t->lane = i % 32;
    t->block = b;
    t->copies = w->copies + (size_t)i * KL_EMU_MAX_COPIES;
    t->ncopies = 0;
    t->batch = 0;
  }
  w->live = w->nthreads;
  w->arrived_block = 0;
}

static void release_block(worker *w) {
  for (int i = 0; i < w->nthreads; i++) {
    fiber *f = &w->fibers[i];
    if (f->state == F_WAIT_BLOCK) f->state = F_RUN;
  }
}

/* Releases the group of warp wp that waits with `lanes` once every live
 * lane of it has arrived, each with the same lanes (one at another
 * group's barrier holds it back: a deadlock if nothing else moves). On
 * release each lane gets its exchange: the value posted by the lane it
 * named, and the group's vote (kl_emu_exchange in the shim). Handing these
 * out here, while every poster waits, lets groups of one warp run apart:
 * a lane's own slots change only when it posts again. A lane that reads
 * one outside the group (not in the mask, or returned) gets poison: a
 * device leaves the value undefined, and the last value a lane posted
 * there (or another block's) would pass for the right one. */
static void warp_try_release(worker *w, int wp, uint32_t lanes) {
  kl_emu_block *b = &w->block;
  uint32_t need = b->warp_active[wp] & lanes;
  if (!need || (w->arrived_lanes[wp] & need) != need) return;
  fiber *lane0 = &w->fibers[wp * 32];
  uint32_t vote = 0;
  for (uint32_t m = need; m; m &= m - 1) {
    int l = __builtin_ctz(m);
    if (lane0[l].wait_lanes != lanes) return;
    if (b->warp_post[wp][l]) vote |= 1u << l;
  }
  for (uint32_t m = need; m; m &= m - 1) {
    int l = __builtin_ctz(m);
    int src = b->warp_src[wp][l] & 31;
    b->warp_got[wp][l] =
        need >> src & 1 ? b->warp_post[wp][src] : KL_EMU_POISON;
    b->warp_vote[wp][l] = vote;
    lane0[l].state = F_RUN;
  }
  w->arrived_lanes[wp] &= ~need;
}

/* ---- two blocks of the reversed check run, interval by interval ----
 * A fiber runs until its next barrier, so within a barrier interval each
 * thread sees everything the threads before it wrote. On a device it sees
 * none of it for sure: a kernel where whichever thread comes first loads
 * the tile and marks it loaded, the others skipping the load, is correct
 * here in both orders and wrong on a GPU, where the others see the mark
 * before the tile (the cheat and second sandbox reviews: 1.8 and 4 times
 * faster than honest). In the reversed check run, two blocks' threads each
 * start an interval from the shared memory of the interval's start plus a
 * fixed pseudo-random half of the words other threads wrote in it since
 * (a mark without its tile, or the reverse); their own writes are kept
 * and everyone's are merged at the barrier. A kernel that reads only its
 * own writes between barriers, as CUDA requires, computes the same bits;
 * one that reads another thread's then differs from the first run
 * (nondeterministic). Sources naming atomics, warp operations or fences
 * (KL_EMU_NO_ISOLATION) share memory within an interval legitimately and
 * are not isolated; a warp barrier met anyway ends the isolation. The two
 * blocks are distinct and drawn from the check's seed (iso_pick), fresh
 * each evaluation: when block 0 alone was isolated, a kernel that raced
 * in every block but block 0 went unseen. Isolating every block would
 * cost a copy of the block's shared memory per thread and interval. */
static int iso_sees(int reader, size_t word) {
  uint32_t h = (uint32_t)reader * 0x9E3779B1u ^ (uint32_t)word * 0x85EBCA77u;
  h ^= h >> 15;
  h *= 0x2C1B3C6Du;
  h ^= h >> 12;
  return (int)(h & 1);
}

static void iso_move(struct iso *s, uint32_t *words, int to_memory) {
  size_t at = 0;
  for (int r = 0; r < 2; r++) {
    if (!s->words[r]) continue; /* no block: reg[r] may be NULL */
    if (to_memory)
      memcpy(s->reg[r], words + at, s->words[r] * 4);
    else
      memcpy(words + at, s->reg[r], s->words[r] * 4);
    at += s->words[r];
  }
}

static void iso_free(struct iso *s) {
  free(s->S), free(s->P), free(s->before), free(s->cur), free(s->W);
  memset(s, 0, sizeof *s);
}

static void iso_begin(worker *w, int bx, int by, int bz) {
  struct iso *s = &w->iso;
  void *tls = NULL;
  int64_t lin = ((int64_t)bz * w->grid.y + by) * w->grid.x + bx;
  if ((lin != w->iso_block[0] && lin != w->iso_block[1]) || !w->m ||
      dlinfo(w->m->so, RTLD_DI_TLS_DATA, &tls) != 0)
    return;
  s->reg[0] = tls, s->words[0] = tls ? w->m->tls_bytes / 4 : 0;
  s->reg[1] = w->dyn_smem, s->words[1] = w->dyn_bytes / 4;
  s->n = s->words[0] + s->words[1];
  s->S = malloc(s->n * 4 + 4), s->P = malloc(s->n * 4 + 4);
  s->before = malloc(s->n * 4 + 4), s->cur = malloc(s->n * 4 + 4);
  s->W = malloc(s->n * 4 + 4);
  if (!s->S || !s->P || !s->before || !s->cur || !s->W) {
    iso_free(s); /* unchecked rather than wrong */
    return;
  }
  iso_move(s, s->S, 0);
  memset(s->W, 0xFF, s->n * 4);
  s->on = 1;
}

/* Thread j's view as it resumes: the interval's start, some of the others'
 * writes since. */
static void iso_before(worker *w, int j) {
  struct iso *s = &w->iso;
  for (size_t i = 0; i < s->n; i++)
    s->before[i] =
        s->W[i] >= 0 && s->W[i] != j && iso_sees(j, i) ? s->P[i] : s->S[i];
  iso_move(s, s->before, 1);
}

/* What thread j changed in its view is its write. */
static void iso_after(worker *w, int j) {
  struct iso *s = &w->iso;
  iso_move(s, s->cur, 0);
  for (size_t i = 0; i < s->n; i++)
    if (s->cur[i] != s->before[i]) s->P[i] = s->cur[i], s->W[i] = j;
}

/* A barrier: every write of the interval is seen from now on. */
static void iso_publish(worker *w) {
  struct iso *s = &w->iso;
  for (size_t i = 0; i < s->n; i++)
    if (s->W[i] >= 0) s->S[i] = s->P[i], s->W[i] = -1;
}

static void iso_end(worker *w) {
  if (!w->iso.on) return;
  iso_publish(w);
  iso_move(&w->iso, w->iso.S, 1);
  iso_free(&w->iso);
}

/* The block's coordinates as messages write them: (x,y), or (x,y,z). */
static void block_name(const worker *w, char *out, size_t len) {
  kl_emu_dim b = w->block.block_idx;
  if (b.z == 0)
    snprintf(out, len, "(%u,%u)", b.x, b.y);
  else
    snprintf(out, len, "(%u,%u,%u)", b.x, b.y, b.z);
}

/* Releases the lanes of warp wp waiting at __activemask once no lane of
 * the warp can run (each live one waits somewhere): one that still can
 * may yet reach the same call, as a lane converged with them on a device
 * would be there too. Each gets the lanes waiting at its own call, so the
 * two sides of a branch get their own lanes. Paths are not joined again
 * where they meet (a device's compiler may do that, the emulator cannot
 * see it): lanes that left a loop at different iterations get apart at a
 * call after it, which a device may do too; __syncwarp() brings them
 * together, as the Programming Guide asks of a kernel that needs it. */
static void active_try_release(worker *w, int wp) {
  fiber *lane0 = &w->fibers[wp * 32];
  for (uint32_t m = w->block.warp_active[wp]; m; m &= m - 1)
    if (lane0[__builtin_ctz(m)].state == F_RUN) return;
  for (uint32_t left = w->active_lanes[wp]; left;) {
    const fiber *f = &lane0[__builtin_ctz(left)];
    uint32_t group = 0;
    for (uint32_t m = left; m; m &= m - 1) {
      const fiber *g = &lane0[__builtin_ctz(m)];
      if (g->site == f->site && g->from == f->from) group |= m & -m;
    }
    for (uint32_t m = group; m; m &= m - 1) {
      int l = __builtin_ctz(m);
      w->block.warp_vote[wp][l] = group;
      lane0[l].state = F_RUN;
    }
    left &= ~group;
  }
  w->active_lanes[wp] = 0;
}

/* A lane met a warp barrier with a mask that leaves it out: on a device
 * the result is undefined (each lane must name itself), so the launch
 * fails saying so. Returns -1. */
static int mask_leaves_out(worker *w, const fiber *f) {
  char blk[48];
  block_name(w, blk, sizeof blk);
  snprintf(w->why, sizeof w->why,
           "lane %d of warp %d in block %s called a warp operation "
           "(shuffle, vote, __syncwarp) with mask 0x%08x, which leaves out "
           "its own lane: every lane must name itself in the mask "
           "(undefined on a device)",
           f->t.lane, f->t.warp, blk, f->wait_lanes);
  return -1;
}

/* For a deadlock's message: the lanes of the first warp with a waiting
 * group, the mask they wait with and the live lanes it names that do not
 * wait with them; "" when no warp barrier waits. */
static void describe_warp_wait(const worker *w, char *out, size_t len) {
  out[0] = 0;
  for (int wp = 0; wp < (w->nthreads + 31) / 32; wp++) {
    uint32_t at = w->arrived_lanes[wp], with = 0;
    if (!at) continue;
    const fiber *lane0 = &w->fibers[wp * 32];
    uint32_t mask = lane0[__builtin_ctz(at)].wait_lanes;
    for (uint32_t m = at; m; m &= m - 1)
      if (lane0[__builtin_ctz(m)].wait_lanes == mask) with |= m & -m;
    snprintf(out, len,
             " (warp %d: lanes 0x%08x wait with mask 0x%08x; lanes 0x%08x "
             "it names never join them)",
             wp, with, mask, w->block.warp_active[wp] & mask & ~with);
    return;
  }
}

/* Bookkeeping after fiber i came back to the scheduler. Returns 0, or -1
 * when the fiber did what fails the launch (w->why says what). */
static int after_yield(worker *w, int i) {
  fiber *f = &w->fibers[i];
  int wp = f->t.warp;
  if (f->state == F_DONE) {
    w->live--;
    w->block.warp_active[wp] &= ~(1u << f->t.lane);
    /* the lane gone may be the last one a waiting group lacked */
    for (uint32_t m = w->arrived_lanes[wp]; m; m &= m - 1)
      warp_try_release(w, wp, w->fibers[wp * 32 + __builtin_ctz(m)].wait_lanes);
  } else if (f->state == F_WAIT_BLOCK) {
    w->arrived_block++;
  } else if (f->state == F_WAIT_WARP) {
    if (!(f->wait_lanes >> f->t.lane & 1)) return mask_leaves_out(w, f);
    w->arrived_lanes[wp] |= 1u << f->t.lane;
    iso_end(w); /* lanes may exchange through shared memory */
    warp_try_release(w, wp, f->wait_lanes);
  } else if (f->state == F_WAIT_ACTIVE) {
    w->active_lanes[wp] |= 1u << f->t.lane;
    iso_end(w);
  }
  if (w->active_lanes[wp]) active_try_release(w, wp);
  if (w->arrived_block > 0 && w->arrived_block == w->live) {
    w->arrived_block = 0;
    if (w->iso.on) iso_publish(w);
    release_block(w);
  }
  return 0;
}

static int run_block_fibers(worker *w, int bx, int by, int bz) {
  init_block_state(w, bx, by, bz);
  iso_begin(w, bx, by, bz);
  for (int i = 0; i < w->nthreads; i++) {
    fiber *f = &w->fibers[i];
    f->state = F_RUN;
    f->sp = kl_fiber_prepare(
        w->stacks + (size_t)i * w->stack_size + (size_t)getpagesize(),
        w->stack_size - (size_t)getpagesize(), fiber_entry);
  }
  while (w->live > 0) {
    int ran = 0;
    for (int k = 0; k < w->nthreads; k++) {
      int i = w->reverse ? w->nthreads - 1 - k : k;
      fiber *f = &w->fibers[i];
      if (f->state != F_RUN) continue;
      w->cur = i;
      if (w->iso.on) iso_before(w, i); /* before the fiber pointer is set */
      *w->tls = &f->t;
#ifdef KL_ASAN
      void *fake = NULL;
      unsigned char *lo = w->stacks + (size_t)i * w->stack_size;
      __sanitizer_start_switch_fiber(&fake, lo + getpagesize(),
                                     w->stack_size - getpagesize());
      kl_fiber_switch(&w->sched_sp, f->sp);
      __sanitizer_finish_switch_fiber(fake, NULL, NULL);
#else
      kl_fiber_switch(&w->sched_sp, f->sp);
#endif
      if (w->iso.on) iso_after(w, i);
      if (after_yield(w, i) != 0) {
        iso_end(w);
        return -1;
      }
      ran = 1;
    }
    if (!ran) {
      int at_block = 0, at_warp = 0;
      for (int i = 0; i < w->nthreads; i++) {
        at_block += w->fibers[i].state == F_WAIT_BLOCK;
        at_warp += w->fibers[i].state == F_WAIT_WARP;
      }
      char blk[48], lanes[160];
      block_name(w, blk, sizeof blk);
      describe_warp_wait(w, lanes, sizeof lanes);
      snprintf(w->why, sizeof w->why,
               "barrier deadlock in block %s: %d threads wait at "
               "__syncthreads, %d at a warp barrier (shuffle, vote, "
               "__syncwarp, a tile's sync); a barrier is inside divergent "
               "code, or a mask names lanes that never meet it%s",
               blk, at_block, at_warp, lanes);
      iso_end(w);
      return -1;
    }
  }
  iso_end(w);
  return 0;
}

static void run_block_plain(worker *w, int bx, int by, int bz) {
  init_block_state(w, bx, by, bz);
  iso_begin(w, bx, by, bz);
  for (int k = 0; k < w->nthreads; k++) {
    int i = w->reverse ? w->nthreads - 1 - k : k;
    if (w->iso.on) iso_before(w, i);
    *w->tls = &w->fibers[i].t;
    run_kernel(w);
    if (w->iso.on) iso_after(w, i);
  }
  iso_end(w);
}

/* A candidate's __shared__ variables are `static thread_local`, so what a
 * launch leaves in them would still be there for the next launch on this
 * thread: memoised results, a launch counter telling checked launches from
 * timed ones. On a device shared memory starts undefined in every block;
 * here it starts as 0xFF bytes (NaN floats, -1 ints) in every launch. The
 * runtime's own fiber pointer lives in the same block and is written
 * before every thread runs. Per launch, not per block: a block's cost
 * would show in the timing. */
static void poison_shared(const kl_emu_module *m) {
  void *block = NULL;
  if (m && m->tls_bytes && dlinfo(m->so, RTLD_DI_TLS_DATA, &block) == 0 &&
      block)
    memset(block, 0xFF, m->tls_bytes);
}

/* Fills the stack below this frame, where a fiber-less kernel's frames
 * will be, with 0xFF: an uninitialised local must not read what the last
 * launch left at the same address. */
static __attribute__((noinline)) void scrub_stack(void) {
  unsigned char below[64 * 1024];
  memset(below, 0xFF, sizeof below);
  __asm__ volatile("" : : "r"(below) : "memory"); /* not elided */
}

/* The same for fiber stacks, which are kept between launches
 * (stack_cache): every fiber's frames start at the same address in every
 * launch, so a kernel could keep a memo of its outputs (128 KiB a thread)
 * in uninitialised locals. Only the pages a kernel ever touched are
 * filled, found with mincore: a fiber stack of 128 KiB is mostly never
 * mapped, and filling all of it would cost every launch 128 KiB a thread
 * and make it resident. The cost left is the kernel's own stack depth. */
static void scrub_fiber_stacks(const worker *w) {
  size_t page = (size_t)getpagesize();
  size_t total = w->stack_size * (size_t)w->nthreads;
  unsigned char resident[1024];
  for (size_t off = 0; off < total;) {
    size_t len = total - off;
    if (len > sizeof resident * page) len = sizeof resident * page;
    int known = mincore(w->stacks + off, len, resident) == 0;
    for (size_t p = 0; p < len / page; p++) {
      size_t at = off + p * page;
      if (at % w->stack_size < page) continue; /* the guard page */
      /* without mincore (it cannot fail on our own mapping, but if it
       * did), every page: slow, never a memo */
      if (known && !(resident[p] & 1)) continue;
#ifdef KL_ASAN
      /* the last launch's frames are gone; their redzones are not */
      __asan_unpoison_memory_region(w->stacks + at, page);
#endif
      memset(w->stacks + at, 0xFF, page);
    }
    off += len;
  }
}

/* The pool threads' stacks are 16 MiB (fiber-less kernels may keep big
 * local arrays), too much to fill every launch: below scrub_stack's 64
 * KiB, only the pages a kernel ever touched (mincore) are filled. Called
 * from a shallow frame; the 16 KiB it leaves below itself (for its own
 * calls' frames) lie inside what scrub_stack fills next. */
static _Thread_local uintptr_t tl_stack_lo; /* 0: not a pool thread */

static __attribute__((noinline)) void scrub_deep(void) {
  unsigned char here;
  uintptr_t page = (uintptr_t)getpagesize();
  uintptr_t lo = tl_stack_lo;
  uintptr_t hi = ((uintptr_t)&here - 16 * 1024) & ~(page - 1);
  if (!lo || hi <= lo) return;
  unsigned char resident[256];
  for (uintptr_t at = lo; at < hi;) {
    size_t n = (size_t)((hi - at) / page);
    if (n > sizeof resident) n = sizeof resident;
    if (mincore((void *)at, n * page, resident) == 0)
      for (size_t p = 0; p < n; p++) {
        if (!(resident[p] & 1)) continue;
#ifdef KL_ASAN
        __asan_unpoison_memory_region((void *)(at + p * page), page);
#endif
        memset((void *)(at + p * page), 0xFF, page);
      }
    at += n * page;
  }
}

static void *worker_main(void *arg) {
  worker *w = arg;
  tl_worker = w;
  /* the module's TLS block first (tls_of touches it): a pool thread's
   * first launch of a module has none yet, and poison_shared found none to
   * fill, so that launch's __shared__ started as zeros, which told a
   * kernel its first launch on a thread from the rest (the cheat review) */
  w->tls = w->tls_of();
  poison_shared(w->m);
  if (w->m && !w->use_fibers) {
    scrub_deep();
    scrub_stack();
  }
  if (w->m && w->use_fibers) scrub_fiber_stacks(w);
  launch *l = w->launch;
  for (;;) {
    if (__atomic_load_n(&l->stop, __ATOMIC_RELAXED)) break;
    int b = __atomic_fetch_add(&l->next_block, 1, __ATOMIC_RELAXED);
    if (b >= l->total_blocks) break;
    /* x fastest, then y, then z (a matmul grid has z = 1) */
    int bx = b % (int)w->grid.x, by = b / (int)w->grid.x % (int)w->grid.y;
    int bz = b / ((int)w->grid.x * (int)w->grid.y);
    if (w->use_fibers) {
      if (run_block_fibers(w, bx, by, bz) != 0) {
        w->failed = 1;
        __atomic_store_n(&l->stop, 1, __ATOMIC_RELAXED);
        break;
      }
    } else {
      run_block_plain(w, bx, by, bz);
      if (w->barrier_without_fibers) {
        __atomic_store_n(&l->stop, 1, __ATOMIC_RELAXED);
        break;
      }
    }
  }
  *w->tls = NULL;
  tl_worker = NULL;
  return NULL;
}

/* Fiber stacks are kept between launches, one set per worker index, so a
 * launch does not map and protect hundreds of stacks again: a run does
 * dozens of launches. Launches are serialised (grid_mu), so the cache needs
 * no finer lock. */
#define KL_EMU_STACK_SLOTS 64
static struct {
  unsigned char *base;
  int n; /* stacks mapped */
  size_t stack_size;
} stack_cache[KL_EMU_STACK_SLOTS];
static pthread_mutex_t grid_mu = PTHREAD_MUTEX_INITIALIZER;

static int worker_alloc(worker *w, int idx, int use_fibers,
                        int dyn_smem_bytes) {
  w->fibers = calloc((size_t)w->nthreads, sizeof(fiber));
  w->copies =
      calloc((size_t)w->nthreads * KL_EMU_MAX_COPIES, sizeof(kl_emu_copy));
  size_t dyn_bytes = ((size_t)dyn_smem_bytes + 127) / 128 * 128 + 128;
  w->dyn_smem = aligned_alloc(128, dyn_bytes);
  w->dyn_bytes = dyn_bytes;
  if (!w->fibers || !w->copies || !w->dyn_smem) return -1;
  /* undefined at the start, as on a device: not the last launch's bytes,
   * which malloc often hands back (a memo) */
  memset(w->dyn_smem, 0xFF, dyn_bytes);
  if (!use_fibers) return 0;
  size_t page = (size_t)getpagesize();
  w->stack_size = KL_FIBER_STACK + page; /* guard page at the low end */
  if (idx < KL_EMU_STACK_SLOTS && stack_cache[idx].n >= w->nthreads) {
    w->stacks = stack_cache[idx].base;
    w->stacks_cached = 1;
    return 0;
  }
  size_t total = w->stack_size * (size_t)w->nthreads;
  void *p = mmap(NULL, total, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) return -1;
  w->stacks = p;
  for (int i = 0; i < w->nthreads; i++)
    mprotect(w->stacks + (size_t)i * w->stack_size, page, PROT_NONE);
  if (idx < KL_EMU_STACK_SLOTS) {
    if (stack_cache[idx].base)
      munmap(stack_cache[idx].base,
             stack_cache[idx].stack_size * (size_t)stack_cache[idx].n);
    stack_cache[idx].base = w->stacks;
    stack_cache[idx].n = w->nthreads;
    stack_cache[idx].stack_size = w->stack_size;
    w->stacks_cached = 1;
  }
  return 0;
}

static void worker_free(worker *w) {
  iso_free(&w->iso);
  free(w->fibers);
  free(w->copies);
  free(w->dyn_smem);
  if (w->stacks && !w->stacks_cached)
    munmap(w->stacks, w->stack_size * (size_t)w->nthreads);
}

/* Maps and touches the fiber stacks of the first `workers` worker slots for
 * blocks of up to 1024 threads, so that the first launch of a fresh
 * process does not pay for them. */
void kl_emu_prewarm(int workers) {
  pthread_mutex_lock(&grid_mu);
  size_t page = (size_t)getpagesize();
  size_t stack_size = KL_FIBER_STACK + page;
  for (int idx = 0; idx < workers && idx < KL_EMU_STACK_SLOTS; idx++) {
    if (stack_cache[idx].n >= KL_EMU_MAX_THREADS) continue;
    unsigned char *p =
        mmap(NULL, stack_size * KL_EMU_MAX_THREADS, PROT_READ | PROT_WRITE,
             MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) break;
    for (int i = 0; i < KL_EMU_MAX_THREADS; i++) {
      unsigned char *lo = p + (size_t)i * stack_size;
      mprotect(lo, page, PROT_NONE);
      lo[stack_size - 1] = 0; /* the page a fiber starts on */
    }
    if (stack_cache[idx].base)
      munmap(stack_cache[idx].base,
             stack_cache[idx].stack_size * (size_t)stack_cache[idx].n);
    stack_cache[idx].base = p;
    stack_cache[idx].n = KL_EMU_MAX_THREADS;
    stack_cache[idx].stack_size = stack_size;
  }
  pthread_mutex_unlock(&grid_mu);
}

/* ---- the OS-thread pool ----
 * Block workers are started once per process and reused by every launch,
 * so a sandboxed run worker can start them before it loads the candidate
 * and then forbid creating threads at all. */

#define KL_EMU_MAX_OS_THREADS 64

static struct {
  pthread_mutex_t mu;
  pthread_cond_t go, done;
  pthread_mutex_t launch_mu; /* one launch at a time */
  int n;                     /* threads started */
  uint64_t generation;
  int remaining;
  worker *ws;
  int nworkers;
} pool = {PTHREAD_MUTEX_INITIALIZER,
          PTHREAD_COND_INITIALIZER,
          PTHREAD_COND_INITIALIZER,
          PTHREAD_MUTEX_INITIALIZER,
          0,
          0,
          0,
          NULL,
          0};

typedef struct pool_arg {
  int idx;
  uint64_t generation; /* the last launch before this thread existed */
} pool_arg;

static void *pool_main(void *arg) {
  pool_arg a = *(pool_arg *)arg;
  free(arg);
  /* this thread's stack, for scrub_deep (read now: before any filter) */
  pthread_attr_t self;
  if (pthread_getattr_np(pthread_self(), &self) == 0) {
    void *lo = NULL;
    size_t size = 0;
    if (pthread_attr_getstack(&self, &lo, &size) == 0)
      tl_stack_lo = (uintptr_t)lo;
    pthread_attr_destroy(&self);
  }
  int idx = a.idx;
  uint64_t seen = a.generation;
  pthread_mutex_lock(&pool.mu);
  for (;;) {
    while (pool.generation == seen)
      pthread_cond_wait(&pool.go, &pool.mu);
    seen = pool.generation;
    if (idx >= pool.nworkers) continue; /* not needed for this launch */
    worker *w = &pool.ws[idx];
    pthread_mutex_unlock(&pool.mu);
    worker_main(w);
    pthread_mutex_lock(&pool.mu);
    if (--pool.remaining == 0) pthread_cond_signal(&pool.done);
  }
  return NULL;
}

int kl_emu_pool_start(int n) {
  if (n > KL_EMU_MAX_OS_THREADS) n = KL_EMU_MAX_OS_THREADS;
  pthread_mutex_lock(&pool.launch_mu);
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  /* Big stacks: fiber-less kernels run on these threads. */
  pthread_attr_setstacksize(&attr, 16u << 20);
  while (pool.n < n) {
    pthread_t t;
    pool_arg *a = malloc(sizeof *a);
    if (!a) break;
    pthread_mutex_lock(&pool.mu);
    a->idx = pool.n;
    a->generation = pool.generation; /* stable: no launch runs meanwhile */
    pthread_mutex_unlock(&pool.mu);
    if (pthread_create(&t, &attr, pool_main, a) != 0) {
      free(a);
      break;
    }
    pthread_detach(t);
    pthread_mutex_lock(&pool.mu);
    pool.n++;
    pthread_mutex_unlock(&pool.mu);
  }
  pthread_attr_destroy(&attr);
  int have = pool.n;
  pthread_mutex_unlock(&pool.launch_mu);
  return have;
}

/* Runs ws[0..nworkers) on the pool and waits for all of them. */
static int pool_run(worker *ws, int nworkers, char *why, size_t whylen) {
  if (kl_emu_pool_start(nworkers) < nworkers && pool.n == 0) {
    snprintf(why, whylen, "cannot start emulator threads: %s", strerror(errno));
    return -1;
  }
  pthread_mutex_lock(&pool.launch_mu);
  pthread_mutex_lock(&pool.mu);
  pool.ws = ws;
  /* With fewer threads than asked (a limit), the same blocks are shared
   * among fewer workers: the block counter hands them all out. */
  pool.nworkers = nworkers < pool.n ? nworkers : pool.n;
  pool.remaining = pool.nworkers;
  pool.generation++;
  pthread_cond_broadcast(&pool.go);
  while (pool.remaining > 0)
    pthread_cond_wait(&pool.done, &pool.mu);
  pool.ws = NULL;
  pthread_mutex_unlock(&pool.mu);
  pthread_mutex_unlock(&pool.launch_mu);
  return 0;
}

/* Runs a grid of total_blocks blocks, each worker a copy of proto, on up to
 * nworkers pool threads. Returns KL_OK, KL_ERUN, or 1 when a fiber-less
 * launch met a barrier. */
static int run_grid(const worker *proto, int total_blocks, int nworkers,
                    int dyn_smem_bytes, char *why, size_t whylen) {
  launch l = {0};
  l.total_blocks = total_blocks;
  if (nworkers > l.total_blocks) nworkers = l.total_blocks;
  worker *ws = calloc((size_t)nworkers, sizeof(worker));
  int rc = KL_OK;
  if (!ws) {
    snprintf(why, whylen, "out of memory for %d emulator workers", nworkers);
    return KL_ERUN;
  }
  for (int i = 0; i < nworkers; i++) {
    worker *w = &ws[i];
    *w = *proto;
    w->launch = &l;
    if (worker_alloc(w, i, w->use_fibers, dyn_smem_bytes) != 0) {
      snprintf(why, whylen, "cannot allocate fiber stacks for %d threads",
               w->nthreads);
      rc = KL_ERUN;
      break;
    }
  }
  if (rc == KL_OK && pool_run(ws, nworkers, why, whylen) != 0) rc = KL_ERUN;
  for (int i = 0; i < nworkers; i++) {
    if (rc == KL_OK && ws[i].failed) {
      snprintf(why, whylen, "%s", ws[i].why);
      rc = KL_ERUN;
    }
    if (rc == KL_OK && ws[i].barrier_without_fibers) rc = 1;
    worker_free(&ws[i]);
  }
  free(ws);
  return rc;
}

/* The two blocks of n the reversed run isolates: distinct, drawn from seed
 * (the check's, fresh each evaluation), so that a kernel cannot race in
 * every block but a fixed one. With one block, that one. */
static void iso_pick(uint64_t seed, int64_t n, int64_t out[2]) {
  uint64_t h = seed * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull;
  h ^= h >> 31;
  h *= 0xBF58476D1CE4E5B9ull;
  h ^= h >> 29;
  out[0] = (int64_t)(h % (uint64_t)n);
  out[1] =
      n > 1 ? (out[0] + 1 + (int64_t)((h >> 32) % (uint64_t)(n - 1))) % n : -1;
}

/* One attempt at the whole grid. Returns KL_OK, KL_ERUN, or 1 when a
 * fiber-less launch met a barrier and must be repeated with fibers. */
static int launch_grid(kl_emu_module *m, const float *A, const float *B,
                       float *C, int M, int N, int K, int nworkers,
                       int use_fibers, char *why, size_t whylen) {
  const kl_launch *g = &m->launch;
  kl_emu_dim grid = {(unsigned)((N + g->tile_cols - 1) / g->tile_cols),
                     (unsigned)((M + g->tile_rows - 1) / g->tile_rows), 1};
  worker proto = {.m = m,
                  .A = A,
                  .B = B,
                  .C = C,
                  .M = M,
                  .N = N,
                  .K = K,
                  .tls_of = m->tls,
                  .grid = grid,
                  .block_dim = {(unsigned)g->block_x, (unsigned)g->block_y, 1},
                  .nthreads = g->block_x * g->block_y,
                  .use_fibers = use_fibers,
                  .reverse = m->reverse,
                  .iso_block = {-1, -1}};
  if (m->reverse && !(m->needs_fibers & KL_EMU_NO_ISOLATION))
    iso_pick(m->iso_seed, (int64_t)grid.x * grid.y, proto.iso_block);
  return run_grid(&proto, (int)(grid.x * grid.y), nworkers, g->dyn_smem_bytes,
                  why, whylen);
}

void kl_emu_set_reverse(kl_emu_module *m, int reverse, uint64_t seed) {
  m->reverse = reverse != 0;
  m->iso_seed = seed;
}

int kl_emu_run(kl_emu_module *m, const float *A, const float *B, float *C,
               int M, int N, int K, int threads, char *why, size_t whylen) {
  if (M < 1 || N < 1 || K < 1) {
    snprintf(why, whylen, "shape %dx%dx%d: every size must be >= 1", M, N, K);
    return KL_ERUN;
  }
  if (kl_launch_validate(&m->launch, why, whylen) != KL_OK) return KL_ERUN;
  if (threads <= 0) threads = (int)sysconf(_SC_NPROCESSORS_ONLN);
  if (threads <= 0) threads = 1;
  pthread_mutex_lock(&grid_mu); /* one launch at a time: shared caches */
  int rc = launch_grid(m, A, B, C, M, N, K, threads,
                       m->needs_fibers & KL_EMU_FIBERS, why, whylen);
  if (rc == 1) {
    /* The text scan missed a barrier: start over with fibers on a fresh
     * poisoned output so that nothing from the first attempt survives. */
    m->needs_fibers |= KL_EMU_FIBERS;
    for (size_t i = 0; i < (size_t)M * (size_t)N; i++)
      C[i] = NAN;
    rc = launch_grid(m, A, B, C, M, N, K, threads, 1, why, whylen);
  }
  pthread_mutex_unlock(&grid_mu);
  return rc;
}

/* ---- the generic launch (emu_launch.h) ---- */

int kl_emu_launch(const kl_emu_program *prog, const kl_emu_launch_cfg *cfg,
                  void (*entry)(void *), void *arg, char *why, size_t whylen) {
  const kl_emu_dim g = cfg->grid, b = cfg->block;
  if (!prog || !prog->tls || !prog->bind || !entry) {
    snprintf(why, whylen, "emulator launch: no program or entry point");
    return KL_ERUN;
  }
  uint64_t blocks = (uint64_t)g.x * g.y * g.z;
  uint64_t threads_per_block = (uint64_t)b.x * b.y * b.z;
  if (blocks < 1 || blocks > INT32_MAX) {
    snprintf(why, whylen,
             "emulator launch: grid (%u,%u,%u) has %llu blocks, "
             "expected 1..%d",
             g.x, g.y, g.z, (unsigned long long)blocks, INT32_MAX);
    return KL_ERUN;
  }
  if (threads_per_block < 1 || threads_per_block > KL_EMU_MAX_THREADS) {
    snprintf(why, whylen,
             "emulator launch: block (%u,%u,%u) has %llu "
             "threads, expected 1..%d",
             b.x, b.y, b.z, (unsigned long long)threads_per_block,
             KL_EMU_MAX_THREADS);
    return KL_ERUN;
  }
  if (cfg->dyn_smem_bytes > KL_EMU_MAX_DYN_SMEM) {
    snprintf(why, whylen,
             "emulator launch: %zu bytes of dynamic shared "
             "memory, at most %d",
             cfg->dyn_smem_bytes, KL_EMU_MAX_DYN_SMEM);
    return KL_ERUN;
  }
  int threads = cfg->threads;
  if (threads <= 0) threads = (int)sysconf(_SC_NPROCESSORS_ONLN);
  if (threads <= 0) threads = 1;
  prog->bind(&kl_emu_runtime_hooks);
  worker proto = {.entry = entry,
                  .entry_arg = arg,
                  .tls_of = prog->tls,
                  .grid = g,
                  .block_dim = b,
                  .nthreads = (int)threads_per_block,
                  .use_fibers = cfg->fibers != 0,
                  .reverse = cfg->reverse != 0};
  pthread_mutex_lock(&grid_mu); /* one launch at a time: shared caches */
  int rc = run_grid(&proto, (int)blocks, threads, (int)cfg->dyn_smem_bytes, why,
                    whylen);
  pthread_mutex_unlock(&grid_mu);
  if (rc == 1) {
    /* No second attempt: the kernel may have updated memory in place. */
    snprintf(why, whylen,
             "emulator launch: the kernel reached a barrier or "
             "warp operation but was launched without fibers");
    rc = KL_ERUN;
  }
  return rc;
}
