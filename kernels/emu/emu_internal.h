/*
 * kernels/emu/emu_internal.h — what emu_build.c and emu_run.c share. Not a
 * public header: the rest of kernlab goes through kernels/kernels.h.
 */
#ifndef KL_EMU_INTERNAL_H
#define KL_EMU_INTERNAL_H
#include "kernels/emu/cuda_shim.h"
#include "kernels/emu/fiber.h"
#include "kernels/kernels.h"

#include <stdint.h>

typedef void (*kl_emu_kernel_fn)(const float *, const float *, float *, int,
                                 int, int);

struct kl_emu_module {
  void *so;                /* dlopen handle */
  kl_emu_kernel_fn kernel; /* the candidate's matmul */
  kl_emu_thread **(*tls)(void);
  kl_launch launch;  /* read from the kl_launch symbol */
  int needs_fibers;  /* kl_emu_needs_fibers's bits (KL_EMU_FIBERS, ...) */
  int reverse;       /* kl_emu_set_reverse: threads resumed last first */
  uint64_t iso_seed; /* kl_emu_set_reverse: which two blocks are isolated */
  char so_path[512];
  size_t tls_bytes; /* the module's thread-local block: its __shared__ */
};

/* The hooks candidate code calls for barriers (emu_run.c). */
extern const kl_emu_hooks kl_emu_runtime_hooks;
/* The shim's text, embedded at build time, and the cooperative groups
 * headers' (cg_shim.h, cg_reduce_shim.h). */
extern const char kl_emu_shim_header[];
extern const char kl_emu_cg_header[];
extern const char kl_emu_cg_reduce_header[];

#endif
