/*
 * kernels/gpu_internal.h — what kernels/gpu.c and kernels/gpu_run.c share:
 * the slices of cuda.h (CUDA 13.0), cupti_activity.h and cublas_api.h that
 * the GPU backend uses, declared here (no CUDA header is included, so the
 * build needs none), and the process-wide state kl_gpu_init fills.
 *
 * Symbol names are the ones cuda.h's #defines select for CUDA 13.0 (the _v2
 * suffixes), looked up with dlsym: calling an unsuffixed legacy entry point
 * would get the 32-bit-size ABI of CUDA 3.x.
 */
#ifndef KERNELS_GPU_INTERNAL_H
#define KERNELS_GPU_INTERNAL_H

#include "kernels/kernels.h"

#include <stddef.h>
#include <stdint.h>

/* ---- cuda.h ---- */
typedef int CUresult; /* enum cudaError_enum; 0 is CUDA_SUCCESS */
typedef int CUdevice;
typedef unsigned long long CUdeviceptr; /* CUdeviceptr_v2 on 64-bit hosts */
typedef struct CUctx_st *CUcontext;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef struct CUevent_st *CUevent;
typedef struct CUstream_st *CUstream;

#define KL_CUDA_SUCCESS 0
#define KL_CUDA_ERROR_STUB_LIBRARY 34
#define KL_CUDA_ERROR_NO_DEVICE 100
#define KL_CUDA_ERROR_PRIMARY_CONTEXT_ACTIVE 708
#define KL_CU_CTX_SCHED_BLOCKING_SYNC 0x04
#define KL_CU_EVENT_DEFAULT 0x0

/* CUdevice_attribute */
#define KL_CU_DEV_MAX_SHARED_MEMORY_PER_BLOCK 8
#define KL_CU_DEV_CLOCK_RATE 13
#define KL_CU_DEV_MULTIPROCESSOR_COUNT 16
#define KL_CU_DEV_L2_CACHE_SIZE 38
#define KL_CU_DEV_MAX_THREADS_PER_MULTIPROCESSOR 39
#define KL_CU_DEV_COMPUTE_CAPABILITY_MAJOR 75
#define KL_CU_DEV_COMPUTE_CAPABILITY_MINOR 76
#define KL_CU_DEV_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN 97

/* CUfunction_attribute */
#define KL_CU_FUNC_MAX_THREADS_PER_BLOCK 0
#define KL_CU_FUNC_SHARED_SIZE_BYTES 1
#define KL_CU_FUNC_CONST_SIZE_BYTES 2
#define KL_CU_FUNC_LOCAL_SIZE_BYTES 3
#define KL_CU_FUNC_NUM_REGS 4
#define KL_CU_FUNC_MAX_DYNAMIC_SHARED_SIZE_BYTES 8

typedef struct kl_cuda_api {
  void *lib;
  CUresult (*Init)(unsigned int);
  CUresult (*DriverGetVersion)(int *);
  CUresult (*DeviceGet)(CUdevice *, int);
  CUresult (*DeviceGetCount)(int *);
  CUresult (*DeviceGetName)(char *, int, CUdevice);
  CUresult (*DeviceGetAttribute)(int *, int, CUdevice);
  CUresult (*DevicePrimaryCtxSetFlags)(CUdevice, unsigned int); /* _v2 */
  CUresult (*DevicePrimaryCtxRetain)(CUcontext *, CUdevice);
  CUresult (*CtxSetCurrent)(CUcontext);
  CUresult (*CtxSynchronize)(void);
  CUresult (*ModuleLoadData)(CUmodule *, const void *);
  CUresult (*ModuleGetFunction)(CUfunction *, CUmodule, const char *);
  CUresult (*ModuleGetGlobal)(CUdeviceptr *, size_t *, CUmodule,
                              const char *); /* _v2 */
  CUresult (*FuncGetAttribute)(int *, int, CUfunction);
  CUresult (*FuncSetAttribute)(CUfunction, int, int);
  CUresult (*OccupancyMaxActiveBlocksPerMultiprocessor)(int *, CUfunction, int,
                                                        size_t);
  CUresult (*MemAlloc)(CUdeviceptr *, size_t);               /* _v2 */
  CUresult (*MemFree)(CUdeviceptr);                          /* _v2 */
  CUresult (*MemcpyHtoD)(CUdeviceptr, const void *, size_t); /* _v2 */
  CUresult (*MemcpyDtoH)(void *, CUdeviceptr, size_t);       /* _v2 */
  CUresult (*MemsetD32)(CUdeviceptr, unsigned int, size_t);  /* _v2 */
  CUresult (*LaunchKernel)(CUfunction, unsigned int, unsigned int, unsigned int,
                           unsigned int, unsigned int, unsigned int,
                           unsigned int, CUstream, void **, void **);
  CUresult (*EventCreate)(CUevent *, unsigned int);
  CUresult (*EventRecord)(CUevent, CUstream);
  CUresult (*EventSynchronize)(CUevent);
  CUresult (*EventElapsedTime)(float *, CUevent, CUevent); /* _v2 */
  CUresult (*GetErrorName)(CUresult, const char **);
} kl_cuda_api;

/* ---- cublas_api.h ---- */
typedef struct cublasContext *cublasHandle_t;
typedef int cublasStatus_t; /* 0 is CUBLAS_STATUS_SUCCESS */
#define KL_CUBLAS_OP_N 0
#define KL_CUBLAS_DEFAULT_MATH 0
#define KL_CUBLAS_PEDANTIC_MATH 2

typedef struct kl_cublas_api {
  void *lib;
  cublasStatus_t (*Create)(cublasHandle_t *); /* cublasCreate_v2 */
  cublasStatus_t (*SetMathMode)(cublasHandle_t, int);
  cublasStatus_t (*Sgemm)(cublasHandle_t, int, int, int, int, int,
                          const float *, const float *, int, const float *, int,
                          const float *, float *, int); /* _v2 */
  cublasStatus_t (*Dgemm)(cublasHandle_t, int, int, int, int, int,
                          const double *, const double *, int, const double *,
                          int, const double *, double *, int); /* _v2 */
  cublasHandle_t handle;
} kl_cublas_api;

/* ---- the process-wide state of an initialised GPU worker ---- */
typedef struct kl_gpu_env {
  int ready;
  kl_cuda_api cu;
  kl_cublas_api blas; /* blas.handle NULL: no cuBLAS (blas_why says why) */
  char blas_why[160];
  int cupti;          /* 1: CONCURRENT_KERNEL records are being collected */
  char cupti_why[96]; /* why not */
  CUdevice dev;
  CUcontext ctx;
  char name[96];
  int cc_major, cc_minor, sm_count, l2_bytes, smem_optin, max_threads_sm;
  int driver_version;
  CUdeviceptr flush;
  size_t flush_bytes;
  CUevent ev0, ev1;
} kl_gpu_env;

extern kl_gpu_env kl_gpu;

/* The CUPTI side (gpu.c): a CUPTI timestamp (ns, the clock of the activity
 * records; 0 without CUPTI), and, after a forced flush, the kernels whose
 * [start, end] lies inside [lo, hi]: their summed duration in ns and count.
 * Records outside are dropped. */
uint64_t kl_gpu_cupti_now(void);
int kl_gpu_cupti_collect(uint64_t lo, uint64_t hi, uint64_t *sum_ns);
/* The SM clock now and its default (NVML), in MHz; -1 when unknown. */
double kl_gpu_sm_clock_mhz(void);
double kl_gpu_default_sm_clock_mhz(void);

/* "CUDA_ERROR_ILLEGAL_ADDRESS" for rc (or "CUDA_ERROR_<rc>"). */
const char *kl_gpu_error_name(CUresult rc);

#endif
