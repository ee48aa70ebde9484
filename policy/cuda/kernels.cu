/*
 * policy/cuda/kernels.cu — the one translation unit of the policy's CUDA
 * kernels: nvcc compiles it into the fatbin embedded in the binary
 * (CMakeLists.txt), and policy/cuda/emu.cpp includes it to compile the same
 * kernels with the host C++ compiler for the emulator. One unit, so that
 * the device side is one module (one cuModuleLoadData) and the emulator
 * side one set of the shim's per-thread state. The list of kernels the
 * host looks up is policy/cuda/kernel_list.h; a kernel added here goes
 * there too.
 */
#include "policy/cuda/embedding.cu"
#include "policy/cuda/rmsnorm.cu"
#include "policy/cuda/matmul.cu"
#include "policy/cuda/pack.cu"
#include "policy/cuda/rope.cu"
#include "policy/cuda/attention.cu"
#include "policy/cuda/swiglu.cu"
#include "policy/cuda/crossentropy.cu"
#include "policy/cuda/adamw.cu"
#include "policy/cuda/kvcache.cu"
#include "policy/cuda/sample.cu"
#include "policy/cuda/bf16.cu"
