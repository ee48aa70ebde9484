/*
 * tests/gpu_standin/standin_nvml.c — a host-only stand-in for NVML
 * (libnvidia-ml.so.1), the partner of standin_cuda.c: the four entry points
 * kernels/gpu.c resolves for the throttle filter's SM clock.
 *
 * What it does: device 0 has a default applications clock of 1980 MHz (an
 * H200's); its current SM clock reads 1980 while the stand-in GPU has just
 * finished work (no driver call but event queries since the last
 * cuCtxSynchronize: kl_standin_gpu_busy) and 345, an idle H200's, once the
 * host has gone on to other driver work. On a device the clock falls
 * within milliseconds of the GPU going idle; here it falls at once and
 * deterministically, so a clock read placed after the launch checks (copy
 * back, verification) finds it idle every time and the sample is dropped
 * as throttled, which is how kernels/gpu_run.c's late clock read was found.
 *
 * What it does NOT test: real NVML (its device enumeration, its match with
 * CUDA's device 0, its file accesses), real clock behaviour or throttling.
 *
 * No nvml.h ships with the CUDA toolkit here, so the prototypes are
 * written out from NVML's documentation: nvmlReturn_t is an enum (0 is
 * NVML_SUCCESS), nvmlDevice_t an opaque pointer, nvmlClockType_t an enum
 * (NVML_CLOCK_SM is 1).
 */
typedef int nvmlReturn_t;
typedef struct nvmlDevice_st *nvmlDevice_t;
typedef int nvmlClockType_t;

#define NVML_SUCCESS 0
#define NVML_ERROR_UNINITIALIZED 1
#define NVML_ERROR_INVALID_ARGUMENT 2
#define NVML_ERROR_NOT_SUPPORTED 3
#define NVML_CLOCK_SM 1
#define DEFAULT_SM_MHZ 1980u
#define IDLE_SM_MHZ 345u

/* From standin_cuda.c, which this library links against. */
int kl_standin_gpu_busy(void);

nvmlReturn_t nvmlInit_v2(void);
nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index,
                                           nvmlDevice_t *device);
nvmlReturn_t nvmlDeviceGetDefaultApplicationsClock(nvmlDevice_t device,
                                                   nvmlClockType_t clockType,
                                                   unsigned int *clockMHz);
nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t device, nvmlClockType_t type,
                                    unsigned int *clock);

static struct nvmlDevice_st { int index; } device0;
static int initialised;

nvmlReturn_t nvmlInit_v2(void) {
  initialised = 1;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index,
                                           nvmlDevice_t *device) {
  if (!initialised) return NVML_ERROR_UNINITIALIZED;
  if (index != 0 || !device) return NVML_ERROR_INVALID_ARGUMENT;
  *device = &device0;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetDefaultApplicationsClock(nvmlDevice_t device,
                                                   nvmlClockType_t clockType,
                                                   unsigned int *clockMHz) {
  if (!initialised) return NVML_ERROR_UNINITIALIZED;
  if (device != &device0 || !clockMHz) return NVML_ERROR_INVALID_ARGUMENT;
  if (clockType != NVML_CLOCK_SM) return NVML_ERROR_NOT_SUPPORTED;
  *clockMHz = DEFAULT_SM_MHZ;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t device, nvmlClockType_t type,
                                    unsigned int *clock) {
  if (!initialised) return NVML_ERROR_UNINITIALIZED;
  if (device != &device0 || !clock) return NVML_ERROR_INVALID_ARGUMENT;
  if (type != NVML_CLOCK_SM) return NVML_ERROR_NOT_SUPPORTED;
  *clock = kl_standin_gpu_busy() ? DEFAULT_SM_MHZ : IDLE_SM_MHZ;
  return NVML_SUCCESS;
}
