/*
 * HOSTILE: incbin_host_file.cu — copies a host file into the module at
 * compile time: the host assembler honours `.incbin`, so the CPU
 * emulator's build of this kernel would carry /proc/self/environ (the
 * lab's environment, tokens included) for the kernel to leak through its
 * outputs or its timing. `#include` of a host file is refused by the
 * scanner (include_host_file.cu); this goes around it, through inline
 * assembly, which is only flagged. The host-compile worker's Landlock
 * ruleset (sandbox/landlock.c) lets the compiler open only the toolchain
 * and its build folder, so the assembler cannot read the file.
 * (Needs Landlock, Linux 5.13+: test_sandbox.py skips the check without
 * it. NVRTC's PTX has no .incbin: the GPU path never reads the file.)
 * EXPECT-STATUS: compile_error
 */
#if defined(__x86_64__) && !defined(__CUDA_ARCH__)
asm(".section .rodata\n"
    ".global kl_leaked\n"
    "kl_leaked:\n"
    ".incbin \"/proc/self/environ\"\n"
    ".byte 0\n"
    ".text\n");
#endif

KL_LAUNCH(16, 16, 16, 16, 0);

extern "C" __global__ void matmul(const float* A, const float* B, float* C,
                                  int M, int N, int K) {
  int r = blockIdx.y * 16 + threadIdx.y, c = blockIdx.x * 16 + threadIdx.x;
  if (r >= M || c >= N) return;
  float acc = 0.0f;
  for (int k = 0; k < K; k++) acc += A[r * K + k] * B[k * N + c];
  C[r * N + c] = acc;
}
