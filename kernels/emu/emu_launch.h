/*
 * kernels/emu/emu_launch.h — the CPU emulator's generic launch, for CUDA
 * kernels compiled INTO this binary by the host C++ compiler against
 * kernels/emu/cuda_shim.h (rather than a candidate's matmul, which
 * kl_emu_build compiles and dlopens, and kl_emu_run launches on the
 * contract's grid).
 *
 * Why: the policy's own CUDA kernels (policy/cuda/) are tested on machines
 * without a GPU by compiling the same .cu sources with the host compiler
 * and running them here, block by block, with real __syncthreads and warp
 * shuffles (fibers), against the CPU reference.
 *
 * How: the translation unit that includes the shim owns the emulator's
 * per-thread state; it hands it over as a kl_emu_program (the shim's own
 * kl_emu_tls and kl_emu_bind). A launch gives any grid and block (x, y,
 * z), the dynamic shared memory, and an entry: a trampoline that every CUDA
 * thread calls with one argument (typically the kernel's argument array,
 * unpacked into a typed call). Launches are synchronous and serialised with
 * kl_emu_run's. Blocks run in parallel on the emulator's OS threads.
 *
 * The prototype lives here rather than in kernels/kernels.h because only
 * code compiled against the shim can use it (it needs kl_emu_dim and
 * kl_emu_hooks from cuda_shim.h).
 */
#ifndef KL_EMU_LAUNCH_H
#define KL_EMU_LAUNCH_H

#include "kernels/emu/cuda_shim.h"
#include "kernels/kernels.h"

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The most dynamic shared memory one block may ask for (sm_90's opt-in
 * limit, the same as kl_launch_validate's). */
#define KL_EMU_MAX_DYN_SMEM (227 * 1024)

/* The shim's per-thread state of one translation unit: pass the shim's
 * kl_emu_tls and kl_emu_bind. */
typedef struct kl_emu_program {
  kl_emu_thread **(*tls)(void);
  void (*bind)(const kl_emu_hooks *);
} kl_emu_program;

typedef struct kl_emu_launch_cfg {
  kl_emu_dim grid;       /* blocks in x, y, z; each >= 1 */
  kl_emu_dim block;      /* threads in x, y, z; 1..1024 in all */
  size_t dyn_smem_bytes; /* extern __shared__ memory per block */
  int fibers;  /* 1: the kernel uses __syncthreads or warp operations (each
                  thread is a fiber); 0: each thread is a plain call, and a
                  barrier reached anyway fails the launch */
  int threads; /* OS threads; 0 = all cores */
  int reverse; /* 0: each round of a block resumes its threads from 0 up;
                  1: from the last down. A fiber runs to its next barrier, so
                  a missing barrier lets a thread see what lower (0) or
                  higher (1) threads wrote before it: a kernel whose result
                  depends on the order has a race that one of the two
                  shows (the policy's tests run both) */
} kl_emu_launch_cfg;

/* Runs entry(arg) once per CUDA thread of the grid and returns when every
 * block has finished: KL_OK, or KL_ERUN with why filled (bad geometry, no
 * memory for the fibers, a barrier deadlock, a barrier without fibers). */
int kl_emu_launch(const kl_emu_program *prog, const kl_emu_launch_cfg *cfg,
                  void (*entry)(void *), void *arg, char *why, size_t whylen);

#ifdef __cplusplus
}
#endif
#endif
