/*
 * kernels/emu/fiber.c — the hand-written context switch behind the emulator's
 * fibers (see fiber.h). x86-64 System V and AArch64 (AAPCS64) only; any other
 * target fails to build with a message rather than falling back to ucontext,
 * whose speed would make the emulator useless for timing.
 */
#include "kernels/emu/fiber.h"

#include <stdint.h>
#include <string.h>

#if defined(__x86_64__)
/* rdi = save_sp, rsi = to_sp. The six callee-saved registers go on the old
 * stack; the new stack holds the same six words followed by the address to
 * return to (for a fresh fiber: its entry function). */
__asm__(".text\n"
        ".globl kl_fiber_switch\n"
        ".type kl_fiber_switch,@function\n"
        "kl_fiber_switch:\n"
        "  pushq %rbp\n"
        "  pushq %rbx\n"
        "  pushq %r12\n"
        "  pushq %r13\n"
        "  pushq %r14\n"
        "  pushq %r15\n"
        "  movq %rsp, (%rdi)\n"
        "  movq %rsi, %rsp\n"
        "  popq %r15\n"
        "  popq %r14\n"
        "  popq %r13\n"
        "  popq %r12\n"
        "  popq %rbx\n"
        "  popq %rbp\n"
        "  ret\n"
        ".size kl_fiber_switch, .-kl_fiber_switch\n"
        ".section .note.GNU-stack,\"\",@progbits\n"
        ".text\n");

void *kl_fiber_prepare(void *stack, size_t size, void (*entry)(void)) {
  uintptr_t top = ((uintptr_t)stack + size) & ~(uintptr_t)15;
  uint64_t *sp = (uint64_t *)top;
  /* After `ret` pops entry, rsp must be 8 mod 16, as if entry was called. */
  *--sp = 0;               /* fake return address of entry */
  *--sp = (uint64_t)entry; /* popped by ret */
  for (int i = 0; i < 6; i++)
    *--sp = 0; /* rbp rbx r12 r13 r14 r15 */
  return sp;
}

#elif defined(__aarch64__)
/* x0 = save_sp, x1 = to_sp. Saves x19-x30 and d8-d15 (AAPCS64 callee-saved)
 * in a 160-byte frame. */
__asm__(".text\n"
        ".globl kl_fiber_switch\n"
        ".type kl_fiber_switch,%function\n"
        "kl_fiber_switch:\n"
        "  sub sp, sp, #160\n"
        "  stp x19, x20, [sp, #0]\n"
        "  stp x21, x22, [sp, #16]\n"
        "  stp x23, x24, [sp, #32]\n"
        "  stp x25, x26, [sp, #48]\n"
        "  stp x27, x28, [sp, #64]\n"
        "  stp x29, x30, [sp, #80]\n"
        "  stp d8, d9, [sp, #96]\n"
        "  stp d10, d11, [sp, #112]\n"
        "  stp d12, d13, [sp, #128]\n"
        "  stp d14, d15, [sp, #144]\n"
        "  mov x2, sp\n"
        "  str x2, [x0]\n"
        "  mov sp, x1\n"
        "  ldp x19, x20, [sp, #0]\n"
        "  ldp x21, x22, [sp, #16]\n"
        "  ldp x23, x24, [sp, #32]\n"
        "  ldp x25, x26, [sp, #48]\n"
        "  ldp x27, x28, [sp, #64]\n"
        "  ldp x29, x30, [sp, #80]\n"
        "  ldp d8, d9, [sp, #96]\n"
        "  ldp d10, d11, [sp, #112]\n"
        "  ldp d12, d13, [sp, #128]\n"
        "  ldp d14, d15, [sp, #144]\n"
        "  add sp, sp, #160\n"
        "  ret\n"
        ".size kl_fiber_switch, .-kl_fiber_switch\n");

void *kl_fiber_prepare(void *stack, size_t size, void (*entry)(void)) {
  uintptr_t top = ((uintptr_t)stack + size) & ~(uintptr_t)15;
  uint64_t *frame = (uint64_t *)(top - 160);
  memset(frame, 0, 160);
  frame[11] = (uint64_t)entry; /* x30, the link register `ret` jumps to */
  return frame;
}
#else
#error "kernlab's emulator needs a fiber switch for this CPU (x86-64, AArch64)"
#endif
