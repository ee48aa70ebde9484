/*
 * kernels/emu/fiber.h — fibers for the CPU emulator (internal to kernels/).
 *
 * One fiber per CUDA thread of a block. A switch saves the callee-saved
 * registers on the current stack, stores the stack pointer, and loads the
 * other fiber's; everything else is caller-saved by the C ABI already. This is
 * what makes the emulator fast enough: ucontext also saves the signal mask
 * with a system call on every switch (measured ~100x slower here).
 */
#ifndef KL_EMU_FIBER_H
#define KL_EMU_FIBER_H
#include <stddef.h>

/* Saves the current context, stores its stack pointer in *save_sp and
 * resumes the context whose stack pointer is to_sp. Returns when some other
 * context switches back to *save_sp. */
void kl_fiber_switch(void **save_sp, void *to_sp);

/* Prepares a fresh stack [stack, stack + size) so that the first switch to
 * the returned stack pointer calls entry(). entry must never return: it ends
 * by switching away for good. */
void *kl_fiber_prepare(void *stack, size_t size, void (*entry)(void));

#endif
