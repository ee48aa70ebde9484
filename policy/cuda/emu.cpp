/*
 * policy/cuda/emu.cpp — the policy's CUDA kernels on the CPU emulator: the
 * very sources nvcc compiles for the device (kernels.cu), compiled here by
 * the host C++ compiler against kernels/emu/cuda_shim.h, plus the
 * emulator backend of pcuda.h (pcuda_emu_open). Built only into the test
 * library klpolicy_cuda_emu: tests/unit/test_policy_cuda.c checks every
 * kernel against the CPU reference this way on machines without a GPU.
 *
 * A launch hands kl_emu_launch a trampoline per kernel, generated from
 * kernel_list.h: each CUDA thread calls it with the argument array the
 * model code built for cuLaunchKernel (pointers to each argument), and the
 * template below casts every slot to the kernel's parameter type and makes
 * the typed call. Every launch runs with fibers (the kernels that need no
 * barrier are cheap either way at test sizes). "Device" memory is host
 * memory (chunks of it, through pcuda_arena.c, poisoned for ASan where
 * not handed out); GEMMs use the tiled kernel.
 */

/* Standard headers before the shim: its CUDA qualifier macros
 * (__noinline__ ...) must not reach libstdc++. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <utility>
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#endif

#include "kernels/emu/cuda_shim.h"

#include "policy/cuda/kernels.cu"

#include "kernels/emu/emu_launch.h"
#include "policy/cuda/pcuda_internal.h"

namespace {

/* f(*(A0 *)args[0], *(A1 *)args[1], ...) */
template <class... A, size_t... I>
void call_unpacked(void (*f)(A...), void **args, std::index_sequence<I...>) {
  f(*static_cast<A *>(args[I])...);
}
template <class... A> void call_with_args(void (*f)(A...), void **args) {
  call_unpacked(f, args, std::index_sequence_for<A...>{});
}

#define PCUDA_EMU_TRAMPOLINE(name)                                             \
  void emu_##name(void *args) {                                                \
    call_with_args(name, static_cast<void **>(args));                          \
  }
PCUDA_KERNEL_LIST(PCUDA_EMU_TRAMPOLINE)
#undef PCUDA_EMU_TRAMPOLINE

#define PCUDA_EMU_ENTRY(name) emu_##name,
void (*const emu_kernels[PCUDA_NUM_KERNELS])(void *) = {
    PCUDA_KERNEL_LIST(PCUDA_EMU_ENTRY)};
#undef PCUDA_EMU_ENTRY

struct emu_state {
  int threads;
  int reverse; /* kl_emu_launch_cfg.reverse (pcuda_emu_set_reverse) */
};

int emu_alloc(pcuda_ctx *ctx, void **dev, size_t bytes) {
  /* 256-byte aligned like cudaMalloc, so vector loads behave alike */
  *dev = aligned_alloc(256, (bytes + 255) / 256 * 256);
  if (*dev) return 0;
  pcuda_fail(ctx, "cpu-emu: out of memory for %zu bytes", bytes);
  return -1;
}
void emu_free(pcuda_ctx *, void *dev) {
  free(dev);
}
int emu_upload(pcuda_ctx *, void *dev, const void *host, size_t bytes) {
  memcpy(dev, host, bytes);
  return 0;
}
int emu_download(pcuda_ctx *, void *host, const void *dev, size_t bytes) {
  memcpy(host, dev, bytes);
  return 0;
}
int emu_zero(pcuda_ctx *, void *dev, size_t bytes) {
  memset(dev, 0, bytes);
  return 0;
}
int emu_launch(pcuda_ctx *ctx, int kernel, pcuda_dim grid, pcuda_dim block,
               size_t dyn_smem, void **args) {
  const emu_state *st = static_cast<const emu_state *>(ctx->impl);
  static const kl_emu_program program = {kl_emu_tls, kl_emu_bind};
  kl_emu_launch_cfg cfg = {};
  cfg.grid = kl_emu_dim{grid.x, grid.y, grid.z};
  cfg.block = kl_emu_dim{block.x, block.y, block.z};
  cfg.dyn_smem_bytes = dyn_smem;
  cfg.fibers = 1;
  cfg.threads = st->threads;
  cfg.reverse = st->reverse;
  char why[256];
  if (kl_emu_launch(&program, &cfg, emu_kernels[kernel], args, why,
                    sizeof why) != KL_OK) {
    pcuda_fail(ctx, "cpu-emu: %s: %s", pcuda_kernel_names[kernel], why);
    return -1;
  }
  return 0;
}
int emu_sync(pcuda_ctx *) {
  return 0; /* launches are synchronous */
}
void emu_close(pcuda_ctx *ctx) {
  free(ctx->impl);
}
/* The arena poisons what it has not handed out (red zones, free blocks,
 * the bytes past a buffer's size), so an overrunning kernel trips ASan. */
void emu_poison(void *p, size_t bytes, int on) {
#if defined(__SANITIZE_ADDRESS__)
  if (on)
    __asan_poison_memory_region(p, bytes);
  else
    __asan_unpoison_memory_region(p, bytes);
#else
  (void)p, (void)bytes, (void)on;
#endif
}

/* The emulator's buffers are the host's: its physical memory, and of it
 * what /proc/meminfo calls available (free plus what the kernel can
 * reclaim), or the free pages where that line is missing. */
int emu_mem_info(pcuda_ctx *, size_t *free_bytes, size_t *total_bytes) {
  long page = sysconf(_SC_PAGESIZE), pages = sysconf(_SC_PHYS_PAGES);
  long avail = sysconf(_SC_AVPHYS_PAGES);
  *total_bytes = pages > 0 && page > 0 ? size_t(pages) * size_t(page) : 0;
  *free_bytes = avail > 0 && page > 0 ? size_t(avail) * size_t(page) : 0;
  FILE *f = fopen("/proc/meminfo", "r");
  char line[128];
  unsigned long long kib;
  while (f && fgets(line, sizeof line, f))
    if (sscanf(line, "MemAvailable: %llu kB", &kib) == 1) {
      *free_bytes = size_t(kib) * 1024;
      break;
    }
  if (f) fclose(f);
  return 0;
}

const pcuda_ops emu_ops = {emu_alloc, emu_free,   emu_upload,  emu_download,
                           emu_zero,  emu_launch, nullptr,     emu_sync,
                           emu_close, emu_poison, emu_mem_info};

/* The arena's chunks on the emulator: small, so that tests put several
 * buffers in one chunk, and a red zone after each buffer. */
constexpr size_t EMU_CHUNK_MIN = size_t(1) << 20;
constexpr size_t EMU_REDZONE = 256;

} // namespace

extern "C" int pcuda_emu_open(pcuda_ctx **out, int threads, char *why,
                              size_t whylen) {
  *out = nullptr;
  pcuda_ctx *ctx = pcuda_ctx_new(&emu_ops, EMU_CHUNK_MIN, EMU_REDZONE);
  emu_state *st =
      ctx ? static_cast<emu_state *>(calloc(1, sizeof(emu_state))) : nullptr;
  if (!st) {
    free(ctx);
    snprintf(why, whylen, "cpu-emu: out of memory");
    return PL_EENV;
  }
  st->threads = threads;
  ctx->impl = st;
  snprintf(ctx->desc, sizeof ctx->desc, "cpu-emu (tiled GEMM)");
  *out = ctx;
  return PL_OK;
}

extern "C" int pcuda_emu_set_reverse(pcuda_ctx *ctx, int reverse) {
  if (!ctx || ctx->ops != &emu_ops) return PL_EINPUT;
  static_cast<emu_state *>(ctx->impl)->reverse = reverse != 0;
  snprintf(ctx->desc, sizeof ctx->desc, "cpu-emu (tiled GEMM%s)",
           reverse ? ", threads resumed last first" : "");
  return PL_OK;
}
