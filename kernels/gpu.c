/*
 * kernels/gpu.c — the GPU backend's environment: loading the CUDA driver,
 * CUPTI and cuBLAS with dlopen, probing for a device without touching CUDA
 * in the calling process, initialising a run worker, collecting CUPTI
 * kernel records, and the two ways to run a GPU job outside the sandbox (a
 * forked child; the cuBLAS baseline). The job itself is kernels/gpu_run.c.
 *
 * Why dlopen: one kernlab binary runs on machines with and without a GPU;
 * without a driver every GPU path ends in a KL_EENV message saying which
 * library or device is missing, never in a loader error.
 *
 * Why the probe forks: DESIGN.md says the lab process makes no CUDA calls
 * (CUDA state does not survive fork, and the lab forks and execs workers).
 * The child dlopens libcuda.so.1, calls cuInit(0) and cuDeviceGetCount, and
 * writes one line back through a pipe.
 *
 * CUPTI (perf-anchors §3.5): CONCURRENT_KERNEL activity records (never the
 * serialising KERNEL kind), enabled at init so that CUPTI's per-module
 * instrumentation is generated before anything is timed. Buffers are
 * handed to CUPTI from a small pool; records are read at each forced flush
 * (the run loop flushes after every sample, outside the timed window). The
 * record layout read here is CUpti_ActivityKernel10 of CUDA 13.0
 * (cupti_activity.h, packed, 8-byte aligned): kind at offset 0, start at
 * 16, end at 24 (uint64 ns). Those offsets have been the same since
 * CUpti_ActivityKernel4; the CUPTI library must still be the 13.x one
 * (cuptiGetVersion >= 130000 is checked), else timing falls back to
 * events and says so.
 *
 * Clocks: NVML (libnvidia-ml.so.1, optional) gives the SM clock after
 * each sample and the default applications clock, so the throttle filter
 * of kernels/stats.c can drop samples taken below 75% of it; without NVML
 * the clocks read as unknown and every sample is kept. NVML's device 0 is
 * assumed to be CUDA's device 0 (set CUDA_VISIBLE_DEVICES consistently).
 *
 * What it does not do: pick a device other than 0 (CUDA_VISIBLE_DEVICES
 * does that), or create streams (everything runs on the legacy default
 * stream, which cuBLAS uses too).
 */
#define _GNU_SOURCE
#include "kernels/gpu_internal.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

kl_gpu_env kl_gpu;

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

int kl_gpu_device_ref(kl_shape s) {
  return (double)s.M * (double)s.N * (double)s.K > KL_GPU_HOST_REF_MAX_MNK;
}

/* ---- the driver ---------------------------------------------------------- */

const char *kl_gpu_error_name(CUresult rc) {
  static _Thread_local char buf[48];
  const char *name = NULL;
  if (kl_gpu.cu.GetErrorName && kl_gpu.cu.GetErrorName(rc, &name) == 0 && name)
    return name;
  snprintf(buf, sizeof buf, "CUDA_ERROR_%d", (int)rc);
  return buf;
}

/* Opens the first of names that loads; first_err gets dlerror of the first
 * attempt (the most telling one). */
static void *open_first(const char *const *names, size_t n, char *first_err,
                        size_t errlen) {
  for (size_t i = 0; i < n; i++) {
    void *lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (lib) return lib;
    if (i == 0) snprintf(first_err, errlen, "%s", dlerror());
  }
  return NULL;
}

#define SYM(api, field, name)                                                  \
  do {                                                                         \
    *(void **)&(api)->field = dlsym((api)->lib, name);                         \
    if (!(api)->field) {                                                       \
      snprintf(why, whylen, "%s has no %s (driver older than CUDA 13?)",       \
               libname, name);                                                 \
      return KL_EENV;                                                          \
    }                                                                          \
  } while (0)

/* dlopens libcuda.so.1 into api and resolves every entry point. */
static int load_driver(kl_cuda_api *api, char *why, size_t whylen) {
  static const char *const names[] = {"libcuda.so.1", "libcuda.so"};
  const char *libname = "libcuda.so.1";
  char err[256] = "";
  if (api->lib) return KL_OK;
  api->lib = open_first(names, 2, err, sizeof err);
  if (!api->lib) {
    /* The usual case reads plainly; anything else (wrong ELF class, a
     * broken install) keeps the loader's words. */
    if (strstr(err, "No such file"))
      snprintf(why, whylen, "no driver (libcuda.so.1 not found)");
    else
      snprintf(why, whylen, "no driver (libcuda.so.1 not loadable: %s)", err);
    return KL_EENV;
  }
  SYM(api, Init, "cuInit");
  SYM(api, DriverGetVersion, "cuDriverGetVersion");
  SYM(api, DeviceGet, "cuDeviceGet");
  SYM(api, DeviceGetCount, "cuDeviceGetCount");
  SYM(api, DeviceGetName, "cuDeviceGetName");
  SYM(api, DeviceGetAttribute, "cuDeviceGetAttribute");
  SYM(api, DevicePrimaryCtxSetFlags, "cuDevicePrimaryCtxSetFlags_v2");
  SYM(api, DevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
  SYM(api, CtxSetCurrent, "cuCtxSetCurrent");
  SYM(api, CtxSynchronize, "cuCtxSynchronize");
  SYM(api, ModuleLoadData, "cuModuleLoadData");
  SYM(api, ModuleGetFunction, "cuModuleGetFunction");
  SYM(api, ModuleGetGlobal, "cuModuleGetGlobal_v2");
  SYM(api, FuncGetAttribute, "cuFuncGetAttribute");
  SYM(api, FuncSetAttribute, "cuFuncSetAttribute");
  SYM(api, OccupancyMaxActiveBlocksPerMultiprocessor,
      "cuOccupancyMaxActiveBlocksPerMultiprocessor");
  SYM(api, MemAlloc, "cuMemAlloc_v2");
  SYM(api, MemFree, "cuMemFree_v2");
  SYM(api, MemcpyHtoD, "cuMemcpyHtoD_v2");
  SYM(api, MemcpyDtoH, "cuMemcpyDtoH_v2");
  SYM(api, MemsetD32, "cuMemsetD32_v2");
  SYM(api, LaunchKernel, "cuLaunchKernel");
  SYM(api, EventCreate, "cuEventCreate");
  SYM(api, EventRecord, "cuEventRecord");
  SYM(api, EventSynchronize, "cuEventSynchronize");
  SYM(api, EventElapsedTime, "cuEventElapsedTime_v2");
  SYM(api, GetErrorName, "cuGetErrorName");
  return KL_OK;
}

/* cuInit, then the device count and device 0's name. Returns KL_OK or
 * KL_EENV with the probe's wording. Uses kl_gpu.cu. */
static int open_device(char *why, size_t whylen) {
  kl_cuda_api *cu = &kl_gpu.cu;
  int rc = load_driver(cu, why, whylen);
  if (rc != KL_OK) return rc;
  CUresult r = cu->Init(0);
  if (r == KL_CUDA_ERROR_NO_DEVICE) {
    snprintf(why, whylen,
             "driver present but no device (cuInit: CUDA_ERROR_NO_DEVICE)");
    return KL_EENV;
  }
  if (r == KL_CUDA_ERROR_STUB_LIBRARY) {
    snprintf(why, whylen,
             "no driver (only the toolkit's stub libcuda; "
             "cuInit: CUDA_ERROR_STUB_LIBRARY)");
    return KL_EENV;
  }
  if (r != KL_CUDA_SUCCESS) {
    snprintf(why, whylen, "driver present but cuInit failed (%s)",
             kl_gpu_error_name(r));
    return KL_EENV;
  }
  int count = 0;
  r = cu->DeviceGetCount(&count);
  if (r != KL_CUDA_SUCCESS || count < 1) {
    snprintf(why, whylen,
             "driver present but no device (cuDeviceGetCount: "
             "%s, %d devices)",
             r ? kl_gpu_error_name(r) : "ok", count);
    return KL_EENV;
  }
  if ((r = cu->DeviceGet(&kl_gpu.dev, 0)) != KL_CUDA_SUCCESS ||
      (r = cu->DeviceGetName(kl_gpu.name, (int)sizeof kl_gpu.name,
                             kl_gpu.dev)) != KL_CUDA_SUCCESS) {
    snprintf(why, whylen, "device 0 does not answer (%s)",
             kl_gpu_error_name(r));
    return KL_EENV;
  }
  cu->DriverGetVersion(&kl_gpu.driver_version);
  return KL_OK;
}

/* ---- the probe: in a forked child ---------------------------------------- */

int kl_gpu_probe(char *why, size_t whylen, char *device_name, size_t len) {
  static int cached = -1;
  static char cached_why[256], cached_name[96];
  if (len) device_name[0] = 0;
  if (cached >= 0) goto answer;
  int fds[2];
  if (pipe(fds) != 0) {
    snprintf(cached_why, sizeof cached_why, "GPU probe: pipe: %s",
             strerror(errno));
    cached = KL_EENV;
    goto answer;
  }
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    char msg[256 + 96 + 4];
    char w[256] = "";
    int rc = open_device(w, sizeof w);
    /* "0 <name>" or "3 <why>" */
    int n =
        snprintf(msg, sizeof msg, "%d %s", rc, rc == KL_OK ? kl_gpu.name : w);
    if (n > (int)sizeof msg - 1) n = (int)sizeof msg - 1;
    (void)!write(fds[1], msg, (size_t)n);
    _exit(0);
  }
  close(fds[1]);
  if (pid < 0) {
    close(fds[0]);
    snprintf(cached_why, sizeof cached_why, "GPU probe: fork: %s",
             strerror(errno));
    cached = KL_EENV;
    goto answer;
  }
  /* cuInit can take seconds on a large machine; a driver that hangs for a
   * minute is an environment problem worth naming. */
  char buf[400];
  size_t got = 0;
  double deadline = now_ms() + 60000;
  for (;;) {
    ssize_t r = read(fds[0], buf + got, sizeof buf - 1 - got);
    if (r > 0) {
      got += (size_t)r;
      if (got < sizeof buf - 1) continue;
    }
    if (r < 0 && errno == EINTR && now_ms() < deadline) continue;
    break;
  }
  buf[got] = 0;
  close(fds[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (got >= 2 && buf[0] == '0' && buf[1] == ' ') {
    snprintf(cached_name, sizeof cached_name, "%.95s", buf + 2);
    cached = KL_OK;
  } else if (got >= 2 && buf[1] == ' ') {
    snprintf(cached_why, sizeof cached_why, "%.255s", buf + 2);
    cached = KL_EENV;
  } else {
    snprintf(cached_why, sizeof cached_why,
             "GPU probe: the child died before answering (%s)",
             WIFSIGNALED(status) ? strsignal(WTERMSIG(status)) : "no answer");
    cached = KL_EENV;
  }
answer:
  if (cached == KL_OK) {
    if (len) snprintf(device_name, len, "%s", cached_name);
    if (whylen) why[0] = 0;
  } else if (whylen) {
    snprintf(why, whylen, "%s", cached_why);
  }
  return cached;
}

/* ---- CUPTI ----------------------------------------------------------------
 */

typedef int CUptiResult; /* 0 is CUPTI_SUCCESS */
#define KL_CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL 10
#define KL_CUPTI_ACTIVITY_FLAG_FLUSH_FORCED 1
#define KL_CUPTI_MIN_VERSION 130000 /* CUPTI_API_VERSION of CUDA 13.0 */
/* CUpti_ActivityKernel10, CUDA 13.0 cupti_activity.h */
#define KL_REC_KIND_OFF 0
#define KL_REC_START_OFF 16
#define KL_REC_END_OFF 24

typedef void (*kl_cupti_req_fn)(uint8_t **, size_t *, size_t *);
typedef void (*kl_cupti_done_fn)(CUcontext, uint32_t, uint8_t *, size_t,
                                 size_t);

static struct {
  void *lib;
  CUptiResult (*GetVersion)(uint32_t *);
  CUptiResult (*ActivityEnable)(int);
  CUptiResult (*ActivityRegisterCallbacks)(kl_cupti_req_fn, kl_cupti_done_fn);
  CUptiResult (*ActivityGetNextRecord)(uint8_t *, size_t, void **);
  CUptiResult (*ActivityFlushAll)(uint32_t);
  CUptiResult (*GetTimestamp)(uint64_t *);
} cupti;

/* Kernel records delivered since the last collect. Buffer callbacks may
 * come from CUPTI's own thread, hence the lock. */
#define KL_CUPTI_MAX_PENDING 4096
#define KL_CUPTI_BUF_BYTES (1u << 20)
static pthread_mutex_t cupti_mu = PTHREAD_MUTEX_INITIALIZER;
static uint64_t pending_start[KL_CUPTI_MAX_PENDING];
static uint64_t pending_end[KL_CUPTI_MAX_PENDING];
static int n_pending, n_overflow;

static void cupti_buffer_requested(uint8_t **buf, size_t *size,
                                   size_t *max_records) {
  /* 8-byte alignment is what CUPTI's samples use; aligned_alloc gives 64. */
  *buf = aligned_alloc(64, KL_CUPTI_BUF_BYTES);
  *size = *buf ? KL_CUPTI_BUF_BYTES : 0;
  *max_records = 0; /* as many as fit */
}

static void cupti_buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *buf,
                                   size_t size, size_t valid) {
  (void)ctx;
  (void)stream;
  (void)size;
  void *rec = NULL;
  pthread_mutex_lock(&cupti_mu);
  while (buf && cupti.ActivityGetNextRecord(buf, valid, &rec) == 0 && rec) {
    uint32_t kind;
    uint64_t start, end;
    memcpy(&kind, (uint8_t *)rec + KL_REC_KIND_OFF, 4);
    if (kind != KL_CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) continue;
    memcpy(&start, (uint8_t *)rec + KL_REC_START_OFF, 8);
    memcpy(&end, (uint8_t *)rec + KL_REC_END_OFF, 8);
    if (start == 0 && end == 0) continue; /* no timestamp collected */
    if (n_pending < KL_CUPTI_MAX_PENDING) {
      pending_start[n_pending] = start;
      pending_end[n_pending] = end;
      n_pending++;
    } else {
      n_overflow++;
    }
  }
  pthread_mutex_unlock(&cupti_mu);
  free(buf);
}

uint64_t kl_gpu_cupti_now(void) {
  uint64_t t = 0;
  if (kl_gpu.cupti && cupti.GetTimestamp(&t) != 0) t = 0;
  return t;
}

int kl_gpu_cupti_collect(uint64_t lo, uint64_t hi, uint64_t *sum_ns) {
  *sum_ns = 0;
  if (!kl_gpu.cupti) return 0;
  cupti.ActivityFlushAll(KL_CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  int n = 0;
  pthread_mutex_lock(&cupti_mu);
  for (int i = 0; i < n_pending; i++) {
    if (pending_start[i] >= lo && pending_end[i] <= hi &&
        pending_end[i] >= pending_start[i]) {
      *sum_ns += pending_end[i] - pending_start[i];
      n++;
    }
  }
  n_pending = 0;
  n_overflow = 0;
  pthread_mutex_unlock(&cupti_mu);
  return n;
}

/* Loads CUPTI and enables CONCURRENT_KERNEL records. Failure only costs
 * the CUPTI timer (kl_gpu.cupti_why says why). */
static void init_cupti(void) {
  static const char *const names[] = {
      "libcupti.so.13", "libcupti.so",
      "/usr/local/cuda/extras/CUPTI/lib64/libcupti.so.13",
      "/usr/local/cuda/lib64/libcupti.so.13"};
  char err[256] = "";
  cupti.lib = open_first(names, sizeof names / sizeof *names, err, sizeof err);
  if (!cupti.lib) {
    snprintf(kl_gpu.cupti_why, sizeof kl_gpu.cupti_why,
             "libcupti.so.13 not found");
    return;
  }
  *(void **)&cupti.GetVersion = dlsym(cupti.lib, "cuptiGetVersion");
  *(void **)&cupti.ActivityEnable = dlsym(cupti.lib, "cuptiActivityEnable");
  *(void **)&cupti.ActivityRegisterCallbacks =
      dlsym(cupti.lib, "cuptiActivityRegisterCallbacks");
  *(void **)&cupti.ActivityGetNextRecord =
      dlsym(cupti.lib, "cuptiActivityGetNextRecord");
  *(void **)&cupti.ActivityFlushAll = dlsym(cupti.lib, "cuptiActivityFlushAll");
  *(void **)&cupti.GetTimestamp = dlsym(cupti.lib, "cuptiGetTimestamp");
  if (!cupti.GetVersion || !cupti.ActivityEnable ||
      !cupti.ActivityRegisterCallbacks || !cupti.ActivityGetNextRecord ||
      !cupti.ActivityFlushAll || !cupti.GetTimestamp) {
    snprintf(kl_gpu.cupti_why, sizeof kl_gpu.cupti_why,
             "libcupti lacks an activity entry point");
    return;
  }
  uint32_t version = 0;
  if (cupti.GetVersion(&version) != 0 || version < KL_CUPTI_MIN_VERSION) {
    snprintf(kl_gpu.cupti_why, sizeof kl_gpu.cupti_why,
             "CUPTI API version %u: the record layout read here is 13.0's",
             version);
    return;
  }
  CUptiResult r = cupti.ActivityRegisterCallbacks(cupti_buffer_requested,
                                                  cupti_buffer_completed);
  if (r == 0)
    r = cupti.ActivityEnable(KL_CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  if (r != 0) {
    /* Another subscriber (nsys, ncu) holds CUPTI: perf-anchors §3.5. */
    snprintf(kl_gpu.cupti_why, sizeof kl_gpu.cupti_why,
             "CUPTI activity could not be enabled (CUptiResult %d)", r);
    return;
  }
  kl_gpu.cupti = 1;
}

/* ---- cuBLAS ---------------------------------------------------------------
 */

static void init_cublas(void) {
  static const char *const names[] = {"libcublas.so.13", "libcublas.so",
                                      "/usr/local/cuda/lib64/libcublas.so.13"};
  kl_cublas_api *b = &kl_gpu.blas;
  char err[256] = "";
  b->lib = open_first(names, sizeof names / sizeof *names, err, sizeof err);
  if (!b->lib) {
    snprintf(kl_gpu.blas_why, sizeof kl_gpu.blas_why,
             "libcublas.so.13 not found (%.100s)", err);
    return;
  }
  *(void **)&b->Create = dlsym(b->lib, "cublasCreate_v2");
  *(void **)&b->SetMathMode = dlsym(b->lib, "cublasSetMathMode");
  *(void **)&b->Sgemm = dlsym(b->lib, "cublasSgemm_v2");
  *(void **)&b->Dgemm = dlsym(b->lib, "cublasDgemm_v2");
  if (!b->Create || !b->SetMathMode || !b->Sgemm || !b->Dgemm) {
    snprintf(kl_gpu.blas_why, sizeof kl_gpu.blas_why,
             "libcublas lacks cublasCreate_v2/SetMathMode/Sgemm_v2/Dgemm_v2");
    return;
  }
  cublasHandle_t h = NULL;
  cublasStatus_t st = b->Create(&h);
  if (st != 0 || !h) {
    snprintf(kl_gpu.blas_why, sizeof kl_gpu.blas_why,
             "cublasCreate_v2 failed (cublasStatus %d)", st);
    return;
  }
  b->handle = h;
}

/* ---- init -----------------------------------------------------------------
 */

#define CK(call, what)                                                         \
  do {                                                                         \
    CUresult r_ = (call);                                                      \
    if (r_ != KL_CUDA_SUCCESS) {                                               \
      snprintf(why, whylen, "cuda:%s during %s", kl_gpu_error_name(r_), what); \
      return KL_EENV;                                                          \
    }                                                                          \
  } while (0)

/* ---- NVML: SM clocks for the throttle filter (optional) ---- */

static struct {
  int (*get_clock)(void *dev, int type, unsigned *mhz);
  void *dev;
  double default_mhz;
  int ok;
} nvml;

/* Loads NVML and reads the default SM clock. Before any seccomp filter:
 * dlopen opens files. Failure only means unknown clocks. */
static void init_nvml(void) {
  void *so = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!so) return;
  int (*init)(void) = (int (*)(void))dlsym(so, "nvmlInit_v2");
  int (*handle)(unsigned, void **) =
      (int (*)(unsigned, void **))dlsym(so, "nvmlDeviceGetHandleByIndex_v2");
  int (*def)(void *, int, unsigned *) = (int (*)(void *, int, unsigned *))dlsym(
      so, "nvmlDeviceGetDefaultApplicationsClock");
  nvml.get_clock =
      (int (*)(void *, int, unsigned *))dlsym(so, "nvmlDeviceGetClockInfo");
  unsigned mhz = 0;
  const int nvml_clock_sm = 1, nvml_success = 0;
  if (!init || !handle || !def || !nvml.get_clock || init() != nvml_success ||
      handle(0, &nvml.dev) != nvml_success ||
      def(nvml.dev, nvml_clock_sm, &mhz) != nvml_success || mhz == 0)
    return;
  nvml.default_mhz = mhz;
  nvml.ok = 1;
}

double kl_gpu_sm_clock_mhz(void) {
  unsigned mhz = 0;
  if (!nvml.ok || nvml.get_clock(nvml.dev, 1 /* NVML_CLOCK_SM */, &mhz) != 0)
    return -1;
  return mhz;
}

double kl_gpu_default_sm_clock_mhz(void) {
  return nvml.ok ? nvml.default_mhz : -1;
}

int kl_gpu_init(char *why, size_t whylen) {
  if (kl_gpu.ready) return KL_OK;
  int rc = open_device(why, whylen);
  if (rc != KL_OK) return rc;
  kl_cuda_api *cu = &kl_gpu.cu;
  int *attr[] = {&kl_gpu.cc_major, &kl_gpu.cc_minor,   &kl_gpu.sm_count,
                 &kl_gpu.l2_bytes, &kl_gpu.smem_optin, &kl_gpu.max_threads_sm};
  int ids[] = {KL_CU_DEV_COMPUTE_CAPABILITY_MAJOR,
               KL_CU_DEV_COMPUTE_CAPABILITY_MINOR,
               KL_CU_DEV_MULTIPROCESSOR_COUNT,
               KL_CU_DEV_L2_CACHE_SIZE,
               KL_CU_DEV_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
               KL_CU_DEV_MAX_THREADS_PER_MULTIPROCESSOR};
  for (size_t i = 0; i < sizeof ids / sizeof *ids; i++)
    CK(cu->DeviceGetAttribute(attr[i], ids[i], kl_gpu.dev),
       "cuDeviceGetAttribute");
  /* CUPTI before the context: its kernel instrumentation is then in place
   * for every module loaded later (perf-anchors §3.5, kineto). */
  init_cupti();
  init_nvml();
  /* Blocking sync: a waiting thread sleeps in the driver rather than
   * spinning (less CPU, fewer sched_yield calls under seccomp). Refused
   * once the primary context is active, which is harmless. */
  CUresult r =
      cu->DevicePrimaryCtxSetFlags(kl_gpu.dev, KL_CU_CTX_SCHED_BLOCKING_SYNC);
  if (r != KL_CUDA_SUCCESS && r != KL_CUDA_ERROR_PRIMARY_CONTEXT_ACTIVE) {
    snprintf(why, whylen, "cuda:%s during cuDevicePrimaryCtxSetFlags",
             kl_gpu_error_name(r));
    return KL_EENV;
  }
  CK(cu->DevicePrimaryCtxRetain(&kl_gpu.ctx, kl_gpu.dev),
     "cuDevicePrimaryCtxRetain");
  CK(cu->CtxSetCurrent(kl_gpu.ctx), "cuCtxSetCurrent");
  /* The L2 flush buffer: twice the L2, at least 32 MiB. */
  size_t l2 = kl_gpu.l2_bytes > 0 ? (size_t)kl_gpu.l2_bytes : (50u << 20);
  kl_gpu.flush_bytes = 2 * l2 < (32u << 20) ? (32u << 20) : 2 * l2;
  kl_gpu.flush_bytes = (kl_gpu.flush_bytes + 3) & ~(size_t)3;
  CK(cu->MemAlloc(&kl_gpu.flush, kl_gpu.flush_bytes), "cuMemAlloc (flush)");
  CK(cu->EventCreate(&kl_gpu.ev0, KL_CU_EVENT_DEFAULT), "cuEventCreate");
  CK(cu->EventCreate(&kl_gpu.ev1, KL_CU_EVENT_DEFAULT), "cuEventCreate");
  init_cublas();
  if (kl_gpu.blas.handle) {
    /* Warm-up: cuBLAS loads its kernels (and cublasLt) lazily; do that
     * before the sandbox's filter, on a small product of each type. */
    enum { W = 64 };
    CUdeviceptr d = 0;
    CK(cu->MemAlloc(&d, 3 * W * W * sizeof(double)), "cuMemAlloc (warm-up)");
    CK(cu->MemsetD32(d, 0, 3 * W * W * 2), "cuMemsetD32 (warm-up)");
    float one = 1, zero = 0;
    double done = 1, dzero = 0;
    kl_cublas_api *b = &kl_gpu.blas;
    b->SetMathMode(b->handle, KL_CUBLAS_DEFAULT_MATH);
    cublasStatus_t st =
        b->Sgemm(b->handle, KL_CUBLAS_OP_N, KL_CUBLAS_OP_N, W, W, W, &one,
                 (const float *)(uintptr_t)d, W,
                 (const float *)(uintptr_t)(d + W * W * 4), W, &zero,
                 (float *)(uintptr_t)(d + 2 * W * W * 4), W);
    b->SetMathMode(b->handle, KL_CUBLAS_PEDANTIC_MATH);
    if (st == 0)
      st = b->Dgemm(b->handle, KL_CUBLAS_OP_N, KL_CUBLAS_OP_N, W, W, W, &done,
                    (const double *)(uintptr_t)d, W,
                    (const double *)(uintptr_t)(d + W * W * 8), W, &dzero,
                    (double *)(uintptr_t)(d + 2 * W * W * 8), W);
    CK(cu->CtxSynchronize(), "the cuBLAS warm-up");
    cu->MemFree(d);
    if (st != 0) {
      snprintf(kl_gpu.blas_why, sizeof kl_gpu.blas_why,
               "cuBLAS warm-up failed (cublasStatus %d)", st);
      kl_gpu.blas.handle = NULL;
    }
  }
  kl_gpu.ready = 1;
  return KL_OK;
}

/* ---- outside the sandbox: a forked child ----------------------------------
 */

typedef struct gpu_fork_arg {
  const kl_run_job *job;
  const uint8_t *cubin;
  size_t cubin_size;
} gpu_fork_arg;

static void gpu_body(void *arg, kl_run_report *rep, float *outs) {
  gpu_fork_arg *a = arg;
  if (kl_gpu_init(rep->why, sizeof rep->why) != KL_OK)
    rep->failed = 1;
  else
    kl_gpu_run_execute(a->job, a->cubin, a->cubin_size, rep, outs);
}

int kl_gpu_run_forked(void *ctx, const kl_run_job *job, const uint8_t *cubin,
                      size_t cubin_size, kl_run_report *rep, float *outs,
                      size_t n_outs, kl_result *out) {
  (void)ctx;
  gpu_fork_arg a = {job, cubin, cubin_size};
  /* cuInit and the module load come on top of the job's own deadline. */
  return kl_run_in_fork(gpu_body, &a, job->deadline_s + 60,
                        "the GPU run worker", rep, outs, n_outs, out);
}

/* The GPU lock (kernels.h, kl_gpu_run): a mutex between this process's
 * threads, then flock on a file every kernlab process of this user shares
 * (KERNLAB_GPU_LOCK, else /tmp/kernlab-gpu-<uid>.lock), so a second lab on
 * the same machine (a campaign and an ad-hoc `eval --backend gpu`) waits
 * too. Where the file cannot be opened, the mutex alone, said once. The
 * descriptor is close-on-exec: workers never hold it. */
static pthread_mutex_t gpu_run_mu = PTHREAD_MUTEX_INITIALIZER;
static int gpu_lock_fd = -2;    /* -2: not opened yet; -1: unavailable */
static char gpu_lock_path[512]; /* for messages */

void kl_gpu_lock(void) {
  pthread_mutex_lock(&gpu_run_mu);
  if (gpu_lock_fd == -2) {
    char *path = gpu_lock_path;
    size_t cap = sizeof gpu_lock_path;
    const char *env = getenv("KERNLAB_GPU_LOCK");
    if (env && env[0])
      snprintf(path, cap, "%s", env);
    else
      snprintf(path, cap, "/tmp/kernlab-gpu-%ld.lock", (long)getuid());
    /* /tmp is shared: no symlink followed, and the file must be ours (one
     * another user made and holds would stall this user's runs). */
    const char *bad = NULL;
    struct stat st;
    gpu_lock_fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (gpu_lock_fd < 0)
      bad = strerror(errno);
    else if (fstat(gpu_lock_fd, &st) != 0 || st.st_uid != getuid())
      bad = "owned by another user";
    if (bad) {
      if (gpu_lock_fd >= 0) close(gpu_lock_fd);
      gpu_lock_fd = -1;
      fprintf(stderr,
              "kernlab: warning: GPU lock file %s: %s; GPU runs of other "
              "kernlab processes are not kept apart from this one's "
              "(KERNLAB_GPU_LOCK names another file)\n",
              path, bad);
    }
  }
  if (gpu_lock_fd >= 0) {
    /* Another kernlab process's run holds the device: say so (once) before
     * waiting, so a wait behind a long campaign, or a stopped one, is not
     * silence. */
    static int said;
    int rc = flock(gpu_lock_fd, LOCK_EX | LOCK_NB);
    if (rc != 0 && errno == EWOULDBLOCK && !said) {
      said = 1;
      fprintf(stderr,
              "kernlab: waiting for the GPU: another kernlab process is "
              "running on it (the lock %s)\n",
              gpu_lock_path);
    }
    while (rc != 0 && (rc = flock(gpu_lock_fd, LOCK_EX)) != 0 &&
           errno == EINTR) {
    }
    if (rc != 0)
      fprintf(stderr,
              "kernlab: warning: GPU lock file: flock: %s; this run is not "
              "kept apart from other kernlab processes\n",
              strerror(errno));
  }
}
void kl_gpu_unlock(void) {
  if (gpu_lock_fd >= 0) flock(gpu_lock_fd, LOCK_UN);
  pthread_mutex_unlock(&gpu_run_mu);
}

int kl_gpu_run(const kl_eval_options *opts, const kl_run_job *job,
               const uint8_t *cubin, size_t cubin_size, kl_run_report *rep,
               float *outs, size_t n_outs, kl_result *out) {
  kl_gpu_lock();
  int ok = opts->exec && opts->exec->run_gpu
               ? opts->exec->run_gpu(opts->exec->ctx, job, cubin, cubin_size,
                                     rep, outs, n_outs, out)
               : kl_gpu_run_forked(NULL, job, cubin, cubin_size, rep, outs,
                                   n_outs, out);
  kl_gpu_unlock();
  return ok;
}

/* ---- the cuBLAS baseline ---------------------------------------------------
 */

double kl_gpu_cublas_time_us(kl_shape s, const kl_eval_options *opts,
                             double *cv, char *why, size_t whylen) {
  if (cv) *cv = -1;
  kl_run_job *job = calloc(1, sizeof *job);
  kl_run_report *rep = calloc(1, sizeof *rep);
  kl_result *scratch = calloc(1, sizeof *scratch);
  float dummy = 0;
  double t = -1;
  if (!job || !rep || !scratch) {
    snprintf(why, whylen, "out of memory");
    goto done;
  }
  job->timed = 1;
  job->timed_shape = s;
  job->seed = opts->seed ? opts->seed : 0x6b65726e6c6162ull;
  job->max_samples = KL_MAX_TIMING_SAMPLES;
  job->time_budget_ms = opts->time_budget_ms;
  job->deadline_s = opts->run_deadline_s;
  /* the host's threads for each launch's inputs and checks, as a
   * candidate's job has them (kernels/check.c) */
  job->threads =
      opts->threads > 0 ? opts->threads : (int)sysconf(_SC_NPROCESSORS_ONLN);
  if (job->threads < 1) job->threads = 1;
  int ok = kl_gpu_run(opts, job, NULL, 0, rep, &dummy, 0, scratch);
  if (!ok) {
    snprintf(why, whylen, "cuBLAS baseline: %s: %s", scratch->status,
             scratch->error);
  } else if (rep->failed || !rep->done || rep->samples < 1) {
    snprintf(why, whylen, "cuBLAS baseline: %s",
             rep->why[0] ? rep->why : "no samples");
  } else {
    t = rep->gpu.median_us;
    if (cv) *cv = rep->gpu.cv;
    /* cuBLAS's launches go through the same checks as a candidate's
     * (kl_verify_launch): a flag here is the checks' fault, not cuBLAS's,
     * and every candidate's verdict at this shape is in doubt. */
    if (rep->flags)
      fprintf(stderr,
              "kernlab: warning: cuBLAS's own timed launches at %dx%dx%d were "
              "flagged (%s): the launch checks do not fit this device; "
              "candidates' timed_output_wrong here is not evidence\n",
              s.M, s.N, s.K, rep->flag_detail);
  }
done:
  free(job);
  free(rep);
  free(scratch);
  return t;
}
