/*
 * tests/gpu_standin/standin_cuda.c — a host-only stand-in for the CUDA
 * driver (libcuda.so.1), for tests/integration/test_gpu_standin.py: it
 * lets `kernlab eval --backend gpu` run the GPU backend's host path
 * (kernels/gpu.c, kernels/gpu_run.c, sandbox/gpu_exec.c and the run-gpu
 * worker under its seccomp filter) on a machine without a GPU.
 *
 * What it is: the 27 driver entry points kernels/gpu.c resolves with dlsym,
 * with the prototypes of CUDA 13.0's cuda.h (included, so a signature that
 * drifts from the real one does not compile; cuda.h's #defines give the
 * _v2 names the loader looks up). "Device memory" is host memory: a
 * CUdeviceptr is a malloc'd address, copies are memcpy. cuModuleLoadData
 * reads the cubin only as an ELF file, for the kl_launch symbol (the
 * geometry the candidate declared); cuLaunchKernel computes C = A B
 * (row-major, float, k ascending) on the CPU from the launch's arguments.
 * Events read the host clock.
 *
 * What it checks of the host code, as a real driver would refuse it: the
 * launch's grid and block are the ones DESIGN.md's contract gives for the
 * module's kl_launch and the shape (CUDA_ERROR_INVALID_VALUE otherwise),
 * dynamic shared memory above 48 KB was opted in first, copies stay inside
 * an allocation of this driver (CUDA_ERROR_INVALID_VALUE, which the lab
 * must report as cuda:INVALID_VALUE), and after an error it injected as a
 * device fault every later call fails (a sticky error, as a real context's).
 *
 * What it does NOT test: no real driver is loaded and no device code runs.
 * The candidate's cubin is ignored beyond kl_launch, so every candidate
 * computes the right product: a correctness verdict here is the stand-in's,
 * never the candidate's, and no anti-cheat flag raised by device behaviour
 * (canaries, input mutation, lazy timed runs) can come from a candidate.
 * Timings are host times of a CPU loop and mean nothing, and the L2 flush
 * flushes nothing (a whole-allocation memset is done lazily, below). CUPTI
 * cannot attach to this driver: CUDA 13.0's libcupti.so.13 loads, and
 * cuptiActivityEnable fails (CUptiResult 999, CUPTI_ERROR_UNKNOWN), so the
 * GPU code must fall back to events.
 *
 * Fault injection, read at cuInit (the worker's environment, inherited
 * from the lab):
 *   KL_STANDIN_FAULT=wrong            the chosen launch writes C = A B + 1
 *   KL_STANDIN_FAULT=launch_error     the chosen cuLaunchKernel returns
 *                                     CUDA_ERROR_ILLEGAL_ADDRESS (700)
 *   KL_STANDIN_FAULT=illegal_address  the chosen launch "faults" as a kernel
 *                                     does on a device: the launch succeeds,
 *                                     the next synchronising call and every
 *                                     call after it return 700
 *   KL_STANDIN_FAULT_LAUNCH=N         the chosen launch is this process's
 *                                     N-th cuLaunchKernel (1-based; default 1)
 *   KL_STANDIN_FAULT_GEOMETRY=bx,by,tr,tc,smem  only modules whose kl_launch
 *                                     is this (default: every module), so one
 *                                     kernel of a batch can be picked
 * KL_STANDIN_TRACE=1 prints each launch on stderr (the lab sends a run-gpu
 * worker's stderr to /dev/null but with KERNLAB_GPU_SECCOMP=record).
 *
 * Shared with the NVML stand-in (standin_nvml.c, which links against this
 * library): kl_standin_gpu_busy() says whether the "GPU" has just finished
 * work, i.e. no driver call but event queries came after the last
 * synchronisation. The NVML stand-in reports the SM clock high only then.
 */
#define _GNU_SOURCE
#include <cuda.h>

#include <elf.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* An sm_90 device as far as the host code's arithmetic goes (occupancy,
 * shared-memory limits); the L2 is small so that the flush buffer is the
 * GPU code's 32 MiB minimum. */
#define STANDIN_NAME "kernlab stand-in (no GPU)"
#define STANDIN_SM_COUNT 132
#define STANDIN_L2_BYTES (4 << 20)
#define STANDIN_SMEM_OPTIN 232448
#define STANDIN_SMEM_DEFAULT 49152
#define STANDIN_THREADS_PER_SM 2048
#define STANDIN_REGS 64

/* ---- the kernel contract's geometry (kernels/abi.h: five ints) ---- */

typedef struct geometry {
  int block_x, block_y, tile_rows, tile_cols, dyn_smem_bytes;
} geometry;

struct CUfunc_st {
  struct CUmod_st *mod;
  int max_dyn_smem; /* CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES */
};

struct CUmod_st {
  geometry *kl_launch; /* "device memory" for cuModuleGetGlobal */
  struct CUfunc_st matmul;
};

struct CUevent_st {
  double ms;
  int recorded;
};

/* ---- process state ---- */

/* Driver calls come from the worker's main thread, but CUPTI or a future
 * thread may call too: the flags the NVML stand-in reads are atomic. */
static atomic_int busy;  /* 1: the last call was a synchronisation */
static CUresult sticky;  /* a fault every later call reports */
static CUresult pending; /* a fault the next synchronisation reports */
static int initialised;
static unsigned long launches; /* cuLaunchKernel calls so far */

static struct {
  enum { FAULT_NONE, FAULT_WRONG, FAULT_LAUNCH, FAULT_ASYNC } kind;
  unsigned long launch;
  int any_geometry;
  geometry geometry;
} fault;

/* Every allocation, so that a copy or memset outside one is refused as a
 * real driver refuses an address it did not hand out. A memset of a whole
 * allocation is only noted (lazy, fill) and done when the memory is next
 * touched: the L2 flush before each timed sample sets 32 MiB that nothing
 * reads, and doing it 200 times per kernel on the CPU would be most of the
 * test's time (several times that under ASan). */
#define MAX_ALLOCS 4096
static struct {
  uintptr_t base;
  size_t bytes;
  int lazy; /* 1: every word is `fill`, not yet written */
  uint32_t fill;
} allocs[MAX_ALLOCS];
static int n_allocs;

/* For the NVML stand-in: 1 while the GPU has just finished work. */
int kl_standin_gpu_busy(void) {
  return atomic_load(&busy);
}

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* Every entry point but the event ones and cuCtxSynchronize starts here:
 * host work means the GPU is no longer "just busy", and a sticky fault
 * fails the call. */
static CUresult enter(void) {
  atomic_store(&busy, 0);
  if (!initialised) return CUDA_ERROR_NOT_INITIALIZED;
  return sticky;
}

/* The allocation holding [p, p + bytes), or -1. */
static int find_alloc(uintptr_t p, size_t bytes) {
  for (int i = 0; i < n_allocs; i++)
    if (p >= allocs[i].base && bytes <= allocs[i].bytes &&
        p - allocs[i].base <= allocs[i].bytes - bytes)
      return i;
  return -1;
}

/* A module's kl_launch is "device memory" too (cuModuleGetGlobal). */
static int in_module_global(uintptr_t p, size_t bytes);

/* Writes out a noted whole-allocation memset before the memory is used. */
static void materialise(int i) {
  if (!allocs[i].lazy) return;
  uint32_t *w = (uint32_t *)allocs[i].base;
  for (size_t k = 0; k < allocs[i].bytes / 4; k++)
    w[k] = allocs[i].fill;
  allocs[i].lazy = 0;
}

/* 1 when [p, p + bytes) is device memory here, made ready to be read or
 * written. */
static int device_range(CUdeviceptr p, size_t bytes) {
  int i = find_alloc((uintptr_t)p, bytes);
  if (i >= 0) materialise(i);
  return i >= 0 || in_module_global((uintptr_t)p, bytes);
}

/* For the cuBLAS stand-in: 1 when [p, p + bytes) is device memory here. */
int kl_standin_device_range(uintptr_t p, size_t bytes) {
  return device_range((CUdeviceptr)p, bytes);
}

/* ---- init and device queries ---- */

static int parse_geometry(const char *s, geometry *g) {
  return sscanf(s, "%d,%d,%d,%d,%d", &g->block_x, &g->block_y, &g->tile_rows,
                &g->tile_cols, &g->dyn_smem_bytes) == 5;
}

CUresult cuInit(unsigned int flags) {
  if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
  const char *kind = getenv("KL_STANDIN_FAULT");
  const char *at = getenv("KL_STANDIN_FAULT_LAUNCH");
  const char *geo = getenv("KL_STANDIN_FAULT_GEOMETRY");
  fault.kind = FAULT_NONE;
  if (kind && !strcmp(kind, "wrong"))
    fault.kind = FAULT_WRONG;
  else if (kind && !strcmp(kind, "launch_error"))
    fault.kind = FAULT_LAUNCH;
  else if (kind && !strcmp(kind, "illegal_address"))
    fault.kind = FAULT_ASYNC;
  else if (kind && kind[0])
    fprintf(stderr, "standin_cuda: KL_STANDIN_FAULT=%s: unknown, ignored\n",
            kind);
  fault.launch = at ? strtoul(at, NULL, 10) : 1;
  fault.any_geometry = !geo || !geo[0];
  if (!fault.any_geometry && !parse_geometry(geo, &fault.geometry)) {
    fprintf(stderr,
            "standin_cuda: KL_STANDIN_FAULT_GEOMETRY=%s: expected "
            "bx,by,tr,tc,smem; no fault injected\n",
            geo);
    fault.kind = FAULT_NONE;
  }
  initialised = 1;
  return CUDA_SUCCESS;
}

CUresult cuDriverGetVersion(int *version) {
  if (!version) return CUDA_ERROR_INVALID_VALUE;
  *version = CUDA_VERSION; /* 13000: the header this was built against */
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetCount(int *count) {
  CUresult r = enter();
  if (r) return r;
  *count = 1;
  return CUDA_SUCCESS;
}

CUresult cuDeviceGet(CUdevice *device, int ordinal) {
  CUresult r = enter();
  if (r) return r;
  if (ordinal != 0) return CUDA_ERROR_INVALID_DEVICE;
  *device = 0;
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetName(char *name, int len, CUdevice dev) {
  CUresult r = enter();
  if (r) return r;
  if (dev != 0) return CUDA_ERROR_INVALID_DEVICE;
  if (!name || len < 1) return CUDA_ERROR_INVALID_VALUE;
  snprintf(name, (size_t)len, "%s", STANDIN_NAME);
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetAttribute(int *pi, CUdevice_attribute attrib,
                              CUdevice dev) {
  CUresult r = enter();
  if (r) return r;
  if (dev != 0) return CUDA_ERROR_INVALID_DEVICE;
  switch (attrib) {
  case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR:
    *pi = 9;
    break;
  case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR:
    *pi = 0;
    break;
  case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT:
    *pi = STANDIN_SM_COUNT;
    break;
  case CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE:
    *pi = STANDIN_L2_BYTES;
    break;
  case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN:
    *pi = STANDIN_SMEM_OPTIN;
    break;
  case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK:
    *pi = STANDIN_SMEM_DEFAULT;
    break;
  case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR:
    *pi = STANDIN_THREADS_PER_SM;
    break;
  default:
    /* An attribute the GPU code did not ask for before: make it visible
     * rather than invent a value. */
    return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}

/* ---- the context: one, never torn down ---- */

static struct CUctx_st { int dummy; } primary;

CUresult cuDevicePrimaryCtxSetFlags(CUdevice dev, unsigned int flags) {
  CUresult r = enter();
  if (r) return r;
  (void)flags;
  return dev == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}

CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev) {
  CUresult r = enter();
  if (r) return r;
  if (dev != 0) return CUDA_ERROR_INVALID_DEVICE;
  *pctx = &primary;
  return CUDA_SUCCESS;
}

CUresult cuCtxSetCurrent(CUcontext ctx) {
  CUresult r = enter();
  if (r) return r;
  return ctx == &primary ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
}

/* Work runs synchronously inside each call, so a synchronisation only
 * reports a fault a launch left pending, and marks the GPU as just busy. */
CUresult cuCtxSynchronize(void) {
  if (!initialised) return CUDA_ERROR_NOT_INITIALIZED;
  if (pending) {
    sticky = pending;
    pending = CUDA_SUCCESS;
  }
  atomic_store(&busy, 1);
  return sticky;
}

/* ---- modules: the cubin is read for kl_launch only ---- */

#define MAX_MODULES 16
static struct CUmod_st *modules[MAX_MODULES];
static int n_modules;

static int in_module_global(uintptr_t p, size_t bytes) {
  for (int i = 0; i < n_modules; i++) {
    uintptr_t g = (uintptr_t)modules[i]->kl_launch;
    if (p >= g && bytes <= sizeof(geometry) &&
        p - g <= sizeof(geometry) - bytes)
      return 1;
  }
  return 0;
}

/* Finds the symbol `kl_launch` in an ELF64 image and copies its five ints.
 * The image comes from NVRTC through the lab, but every offset is checked
 * as if it did not. Returns 0, or -1 when the image has no such symbol. */
static int read_kl_launch(const unsigned char *img, size_t size, geometry *g) {
  const Elf64_Ehdr *eh = (const Elf64_Ehdr *)img;
  if (size < sizeof *eh || memcmp(img, ELFMAG, SELFMAG) != 0 ||
      img[EI_CLASS] != ELFCLASS64 || eh->e_shentsize != sizeof(Elf64_Shdr) ||
      eh->e_shoff > size ||
      (size - eh->e_shoff) / sizeof(Elf64_Shdr) < eh->e_shnum)
    return -1;
  const Elf64_Shdr *sh = (const Elf64_Shdr *)(img + eh->e_shoff);
  for (int i = 0; i < eh->e_shnum; i++) {
    if (sh[i].sh_type != SHT_SYMTAB || sh[i].sh_link >= eh->e_shnum) continue;
    const Elf64_Shdr *strtab = &sh[sh[i].sh_link];
    if (sh[i].sh_offset > size || sh[i].sh_size > size - sh[i].sh_offset ||
        strtab->sh_offset > size || strtab->sh_size > size - strtab->sh_offset)
      return -1;
    const Elf64_Sym *sym = (const Elf64_Sym *)(img + sh[i].sh_offset);
    size_t n = sh[i].sh_size / sizeof *sym;
    for (size_t k = 0; k < n; k++) {
      if (sym[k].st_name >= strtab->sh_size) continue;
      const char *name = (const char *)img + strtab->sh_offset + sym[k].st_name;
      if (strnlen(name, strtab->sh_size - sym[k].st_name) ==
              strtab->sh_size - sym[k].st_name ||
          strcmp(name, "kl_launch") != 0)
        continue;
      if (sym[k].st_shndx >= eh->e_shnum || sym[k].st_size < sizeof *g)
        return -1;
      const Elf64_Shdr *sec = &sh[sym[k].st_shndx];
      if (sec->sh_offset > size || sym[k].st_value > sec->sh_size ||
          sec->sh_size - sym[k].st_value < sizeof *g ||
          sec->sh_size > size - sec->sh_offset)
        return -1;
      memcpy(g, img + sec->sh_offset + sym[k].st_value, sizeof *g);
      return 0;
    }
  }
  return -1;
}

CUresult cuModuleLoadData(CUmodule *module, const void *image) {
  CUresult r = enter();
  if (r) return r;
  if (!module || !image) return CUDA_ERROR_INVALID_VALUE;
  /* The API takes no size: the ELF header says how far the section table
   * reaches, and the lab handed a whole cubin. */
  const Elf64_Ehdr *eh = image;
  if (memcmp(image, ELFMAG, SELFMAG) != 0) return CUDA_ERROR_INVALID_IMAGE;
  size_t size = eh->e_shoff + (size_t)eh->e_shnum * sizeof(Elf64_Shdr);
  const Elf64_Shdr *sh =
      (const Elf64_Shdr *)((const char *)image + eh->e_shoff);
  for (int i = 0; i < eh->e_shnum; i++)
    if (sh[i].sh_type != SHT_NOBITS && sh[i].sh_offset + sh[i].sh_size > size)
      size = sh[i].sh_offset + sh[i].sh_size;
  geometry g;
  if (read_kl_launch(image, size, &g) != 0) return CUDA_ERROR_INVALID_IMAGE;
  if (n_modules == MAX_MODULES) return CUDA_ERROR_OUT_OF_MEMORY;
  struct CUmod_st *m = calloc(1, sizeof *m);
  if (!m || !(m->kl_launch = malloc(sizeof g))) {
    free(m);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  *m->kl_launch = g;
  m->matmul.mod = m;
  modules[n_modules++] = m;
  *module = m;
  return CUDA_SUCCESS;
}

CUresult cuModuleGetFunction(CUfunction *hfunc, CUmodule hmod,
                             const char *name) {
  CUresult r = enter();
  if (r) return r;
  if (!hfunc || !hmod || !name) return CUDA_ERROR_INVALID_VALUE;
  if (strcmp(name, "matmul") != 0) return CUDA_ERROR_NOT_FOUND;
  *hfunc = &hmod->matmul;
  return CUDA_SUCCESS;
}

CUresult cuModuleGetGlobal(CUdeviceptr *dptr, size_t *bytes, CUmodule hmod,
                           const char *name) {
  CUresult r = enter();
  if (r) return r;
  if (!hmod || !name) return CUDA_ERROR_INVALID_VALUE;
  if (strcmp(name, "kl_launch") != 0) return CUDA_ERROR_NOT_FOUND;
  if (dptr) *dptr = (CUdeviceptr)(uintptr_t)hmod->kl_launch;
  if (bytes) *bytes = sizeof(geometry);
  return CUDA_SUCCESS;
}

/* Resource use of a made-up compile: 64 registers, no spills, no static
 * shared memory, 1024 threads per block at most. */
CUresult cuFuncGetAttribute(int *pi, CUfunction_attribute attrib,
                            CUfunction hfunc) {
  CUresult r = enter();
  if (r) return r;
  if (!pi || !hfunc) return CUDA_ERROR_INVALID_VALUE;
  switch (attrib) {
  case CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK:
    *pi = 1024;
    break;
  case CU_FUNC_ATTRIBUTE_NUM_REGS:
    *pi = STANDIN_REGS;
    break;
  case CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES:
  case CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES:
  case CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES:
    *pi = 0;
    break;
  case CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES:
    *pi = hfunc->max_dyn_smem;
    break;
  default:
    return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}

CUresult cuFuncSetAttribute(CUfunction hfunc, CUfunction_attribute attrib,
                            int value) {
  CUresult r = enter();
  if (r) return r;
  if (!hfunc || attrib != CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES ||
      value < 0 || value > STANDIN_SMEM_OPTIN)
    return CUDA_ERROR_INVALID_VALUE;
  hfunc->max_dyn_smem = value;
  return CUDA_SUCCESS;
}

CUresult cuOccupancyMaxActiveBlocksPerMultiprocessor(int *numBlocks,
                                                     CUfunction func,
                                                     int blockSize,
                                                     size_t dynamicSMemSize) {
  CUresult r = enter();
  if (r) return r;
  if (!numBlocks || !func || blockSize < 1 || blockSize > 1024)
    return CUDA_ERROR_INVALID_VALUE;
  int by_threads = STANDIN_THREADS_PER_SM / blockSize;
  int by_smem = dynamicSMemSize ? (int)(STANDIN_SMEM_OPTIN / dynamicSMemSize)
                                : by_threads;
  *numBlocks = by_threads < by_smem ? by_threads : by_smem;
  return CUDA_SUCCESS;
}

/* ---- memory ---- */

CUresult cuMemAlloc(CUdeviceptr *dptr, size_t bytesize) {
  CUresult r = enter();
  if (r) return r;
  if (!dptr || bytesize == 0) return CUDA_ERROR_INVALID_VALUE;
  if (n_allocs == MAX_ALLOCS) return CUDA_ERROR_OUT_OF_MEMORY;
  /* 256-byte aligned, as cuMemAlloc's pointers are; the size rounded up
   * because aligned_alloc wants a multiple of the alignment. */
  void *p = aligned_alloc(256, (bytesize + 255) / 256 * 256);
  if (!p) return CUDA_ERROR_OUT_OF_MEMORY;
  allocs[n_allocs].base = (uintptr_t)p;
  allocs[n_allocs].bytes = bytesize;
  allocs[n_allocs].lazy = 0;
  n_allocs++;
  *dptr = (CUdeviceptr)(uintptr_t)p;
  return CUDA_SUCCESS;
}

CUresult cuMemFree(CUdeviceptr dptr) {
  CUresult r = enter();
  if (r) return r;
  for (int i = 0; i < n_allocs; i++) {
    if (allocs[i].base != (uintptr_t)dptr) continue;
    free((void *)allocs[i].base);
    allocs[i] = allocs[--n_allocs];
    return CUDA_SUCCESS;
  }
  return CUDA_ERROR_INVALID_VALUE;
}

CUresult cuMemcpyHtoD(CUdeviceptr dstDevice, const void *srcHost,
                      size_t ByteCount) {
  CUresult r = enter();
  if (r) return r;
  if (!srcHost || !device_range(dstDevice, ByteCount))
    return CUDA_ERROR_INVALID_VALUE;
  memcpy((void *)(uintptr_t)dstDevice, srcHost, ByteCount);
  return CUDA_SUCCESS;
}

CUresult cuMemcpyDtoH(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount) {
  CUresult r = enter();
  if (r) return r;
  if (!dstHost || !device_range(srcDevice, ByteCount))
    return CUDA_ERROR_INVALID_VALUE;
  memcpy(dstHost, (const void *)(uintptr_t)srcDevice, ByteCount);
  return CUDA_SUCCESS;
}

CUresult cuMemsetD32(CUdeviceptr dstDevice, unsigned int ui, size_t N) {
  CUresult r = enter();
  if (r) return r;
  if (dstDevice % 4 || N > SIZE_MAX / 4) return CUDA_ERROR_INVALID_VALUE;
  int whole = find_alloc((uintptr_t)dstDevice, N * 4);
  if (whole >= 0 && allocs[whole].base == (uintptr_t)dstDevice &&
      allocs[whole].bytes == N * 4) {
    allocs[whole].lazy = 1; /* written when next touched */
    allocs[whole].fill = ui;
    return CUDA_SUCCESS;
  }
  if (!device_range(dstDevice, N * 4)) return CUDA_ERROR_INVALID_VALUE;
  uint32_t *p = (uint32_t *)(uintptr_t)dstDevice;
  for (size_t i = 0; i < N; i++)
    p[i] = ui;
  return CUDA_SUCCESS;
}

/* ---- the launch: C = A B on the CPU ---- */

/* C (M,N) = A (M,K) B (K,N), row-major; each element summed over k in
 * ascending order in float, as the naive seed does. i-k-j order keeps the
 * inner loop on contiguous rows. */
static void matmul_host(const float *A, const float *B, float *C, int M, int N,
                        int K) {
  for (int i = 0; i < M; i++) {
    float *c = C + (size_t)i * N;
    for (int j = 0; j < N; j++)
      c[j] = 0;
    for (int k = 0; k < K; k++) {
      float a = A[(size_t)i * K + k];
      const float *b = B + (size_t)k * N;
      for (int j = 0; j < N; j++)
        c[j] += a * b[j];
    }
  }
}

static int same_geometry(const geometry *a, const geometry *b) {
  return !memcmp(a, b, sizeof *a);
}

CUresult cuLaunchKernel(CUfunction f, unsigned int gridDimX,
                        unsigned int gridDimY, unsigned int gridDimZ,
                        unsigned int blockDimX, unsigned int blockDimY,
                        unsigned int blockDimZ, unsigned int sharedMemBytes,
                        CUstream hStream, void **kernelParams, void **extra) {
  CUresult r = enter();
  if (r) return r;
  if (!f || !kernelParams || extra || hStream) return CUDA_ERROR_INVALID_VALUE;
  /* matmul(const float* A, const float* B, float* C, int M, int N, int K) */
  CUdeviceptr dA = *(CUdeviceptr *)kernelParams[0];
  CUdeviceptr dB = *(CUdeviceptr *)kernelParams[1];
  CUdeviceptr dC = *(CUdeviceptr *)kernelParams[2];
  int M = *(int *)kernelParams[3], N = *(int *)kernelParams[4],
      K = *(int *)kernelParams[5];
  const geometry *g = f->mod->kl_launch;
  launches++;
  if (getenv("KL_STANDIN_TRACE"))
    fprintf(stderr,
            "standin_cuda: launch %lu: grid (%u,%u,%u) block (%u,%u,%u) "
            "smem %u, %dx%dx%d\n",
            launches, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY,
            blockDimZ, sharedMemBytes, M, N, K);
  /* DESIGN.md's contract: grid (ceil(N/tile_cols), ceil(M/tile_rows)),
   * block (block_x, block_y), the declared dynamic shared memory, which
   * above the default limit needs the opt-in first. */
  if (M < 1 || N < 1 || K < 1 ||
      gridDimX != (unsigned)((N + g->tile_cols - 1) / g->tile_cols) ||
      gridDimY != (unsigned)((M + g->tile_rows - 1) / g->tile_rows) ||
      gridDimZ != 1 || blockDimX != (unsigned)g->block_x ||
      blockDimY != (unsigned)g->block_y || blockDimZ != 1 ||
      sharedMemBytes != (unsigned)g->dyn_smem_bytes ||
      (sharedMemBytes > STANDIN_SMEM_DEFAULT &&
       sharedMemBytes > (unsigned)f->max_dyn_smem))
    return CUDA_ERROR_INVALID_VALUE;
  if (!device_range(dA, sizeof(float) * (size_t)M * K) ||
      !device_range(dB, sizeof(float) * (size_t)K * N) ||
      !device_range(dC, sizeof(float) * (size_t)M * N))
    return CUDA_ERROR_ILLEGAL_ADDRESS; /* what the kernel would have hit */
  int chosen = fault.kind != FAULT_NONE && launches == fault.launch &&
               (fault.any_geometry || same_geometry(g, &fault.geometry));
  if (chosen && fault.kind == FAULT_LAUNCH) {
    sticky = CUDA_ERROR_ILLEGAL_ADDRESS;
    return sticky;
  }
  if (chosen && fault.kind == FAULT_ASYNC) {
    pending = CUDA_ERROR_ILLEGAL_ADDRESS; /* C left as it was */
    return CUDA_SUCCESS;
  }
  float *C = (float *)(uintptr_t)dC;
  matmul_host((const float *)(uintptr_t)dA, (const float *)(uintptr_t)dB, C, M,
              N, K);
  if (chosen && fault.kind == FAULT_WRONG)
    for (size_t i = 0; i < (size_t)M * N; i++)
      C[i] += 1.0f;
  return CUDA_SUCCESS;
}

/* ---- events: the host clock at record time ---- */

CUresult cuEventCreate(CUevent *phEvent, unsigned int Flags) {
  CUresult r = enter();
  if (r) return r;
  if (!phEvent || Flags != CU_EVENT_DEFAULT) return CUDA_ERROR_INVALID_VALUE;
  *phEvent = calloc(1, sizeof **phEvent);
  return *phEvent ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

CUresult cuEventRecord(CUevent hEvent, CUstream hStream) {
  if (!initialised) return CUDA_ERROR_NOT_INITIALIZED;
  if (sticky) return sticky;
  if (!hEvent || hStream) return CUDA_ERROR_INVALID_VALUE;
  hEvent->ms = now_ms();
  hEvent->recorded = 1;
  return CUDA_SUCCESS;
}

CUresult cuEventSynchronize(CUevent hEvent) {
  if (!initialised) return CUDA_ERROR_NOT_INITIALIZED;
  if (!hEvent) return CUDA_ERROR_INVALID_HANDLE;
  return sticky;
}

CUresult cuEventElapsedTime(float *pMilliseconds, CUevent hStart,
                            CUevent hEnd) {
  if (!initialised) return CUDA_ERROR_NOT_INITIALIZED;
  if (sticky) return sticky;
  if (!pMilliseconds || !hStart || !hEnd) return CUDA_ERROR_INVALID_HANDLE;
  if (!hStart->recorded || !hEnd->recorded) return CUDA_ERROR_INVALID_HANDLE;
  *pMilliseconds = (float)(hEnd->ms - hStart->ms);
  return CUDA_SUCCESS;
}

/* ---- errors ---- */

CUresult cuGetErrorName(CUresult error, const char **pStr) {
  static const struct {
    CUresult rc;
    const char *name;
  } names[] = {
      {CUDA_SUCCESS, "CUDA_SUCCESS"},
      {CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE"},
      {CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY"},
      {CUDA_ERROR_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED"},
      {CUDA_ERROR_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE"},
      {CUDA_ERROR_INVALID_IMAGE, "CUDA_ERROR_INVALID_IMAGE"},
      {CUDA_ERROR_INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT"},
      {CUDA_ERROR_INVALID_HANDLE, "CUDA_ERROR_INVALID_HANDLE"},
      {CUDA_ERROR_NOT_FOUND, "CUDA_ERROR_NOT_FOUND"},
      {CUDA_ERROR_ILLEGAL_ADDRESS, "CUDA_ERROR_ILLEGAL_ADDRESS"},
      {CUDA_ERROR_NOT_SUPPORTED, "CUDA_ERROR_NOT_SUPPORTED"},
  };
  if (!pStr) return CUDA_ERROR_INVALID_VALUE;
  for (size_t i = 0; i < sizeof names / sizeof *names; i++)
    if (names[i].rc == error) {
      *pStr = names[i].name;
      return CUDA_SUCCESS;
    }
  *pStr = NULL; /* as the driver does for a code it does not know */
  return CUDA_ERROR_INVALID_VALUE;
}

/* ---- what other NVIDIA libraries ask of a driver ----
 *
 * NVRTC (in the compile worker) and CUPTI (in the run-gpu worker) dlopen
 * libcuda.so.1 themselves when it is on the library path, call cuInit and
 * ask for the driver's private export tables; NVRTC calls
 * cuGetExportTable without checking that dlsym found it. Both are refused
 * here (there is no such table to give): NVRTC then compiles as it does
 * without a driver, and CUPTI cannot attach, so the GPU code times with
 * events and says why. */

CUresult cuGetExportTable(const void **ppExportTable,
                          const CUuuid *pExportTableId) {
  (void)pExportTableId;
  if (ppExportTable) *ppExportTable = NULL;
  return CUDA_ERROR_NOT_SUPPORTED;
}

CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion,
                          cuuint64_t flags,
                          CUdriverProcAddressQueryResult *symbolStatus) {
  (void)symbol;
  (void)cudaVersion;
  (void)flags;
  if (pfn) *pfn = NULL;
  if (symbolStatus) *symbolStatus = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  return CUDA_ERROR_NOT_FOUND;
}
