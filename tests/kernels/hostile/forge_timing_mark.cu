/*
 * HOSTILE: forge_timing_mark.cu — writes a well-formed MARK frame ("the
 * timed runs ended") into the run worker's reply pipe (descriptor 4) from
 * its first launch, hoping the supervisor's clock stops early. The runner's
 * own marks still come, so the supervisor sees them out of order and
 * refuses the run; a frame of another protocol version is refused as
 * malformed. Either way a run_error, never a timing.
 * EXPECT-STATUS: run_error
 */
#ifndef __CUDA_ARCH__
extern "C" long write(int, const void *, unsigned long);
/* once per worker: the mark is kept in the environment (the module's own
 * data is read-only on cpu-emu) */
extern "C" char *getenv(const char *);
extern "C" int setenv(const char *, const char *, int);
static unsigned kl_crc32c(const unsigned char *p, int n) {
  unsigned c = ~0u;
  for (int i = 0; i < n; i++) {
    c ^= p[i];
    for (int k = 0; k < 8; k++) c = (c >> 1) ^ (0x82f63b78u & -(c & 1u));
  }
  return ~c;
}
static void kl_forge(void) {
  if (getenv("KL_FORGED")) return;
  setenv("KL_FORGED", "1", 1);
  int phase = 1;
  struct {
    unsigned magic;
    unsigned short version, type;
    unsigned long long len;
    unsigned crc, reserved;
  } h = {0x31464c4bu, 3, 7, sizeof phase, 0, 0};
  h.crc = kl_crc32c((const unsigned char *)&phase, sizeof phase);
  write(4, &h, sizeof h);
  write(4, &phase, sizeof phase);
}
#define KL_EVIL() kl_forge()
#else
#define KL_EVIL()
#endif

#define BS 16
KL_LAUNCH(BS, BS, BS, BS, 0);

extern "C" __global__ void matmul(const float *A, const float *B, float *C,
                                  int M, int N, int K) {
  const int row = blockIdx.y * BS + threadIdx.y;
  const int col = blockIdx.x * BS + threadIdx.x;
  if (row == 0 && col == 0) KL_EVIL();
  if (row < M && col < N) {
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) acc += A[row * K + k] * B[k * N + col];
    C[row * N + col] = acc;
  }
}
