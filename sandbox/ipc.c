/*
 * sandbox/ipc.c — framed messages over pipes between the lab (supervisor)
 * and its workers.
 *
 * A frame is a 24-byte header — magic "KLF1", protocol version, message
 * type, payload length, CRC-32C of the payload — followed by the payload.
 * The receiver checks all of it and a caller-given size limit before it
 * allocates, so a confused or hostile worker can make the supervisor reject
 * a message but never make it allocate without bound or misread a frame.
 * Reads wait with a deadline (poll), so a silent worker cannot hang the lab.
 */
#define _GNU_SOURCE
#include "sandbox/sandbox_internal.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define SBX_MAGIC 0x31464c4bu /* "KLF1" little-endian */

typedef struct frame_header {
  uint32_t magic;
  uint16_t version;
  uint16_t type;
  uint64_t len;
  uint32_t crc;
  uint32_t reserved;
} frame_header;

/* The frame checksum is CRC-32C (Castagnoli, reflected polynomial
 * 0x82f63b78): x86-64 computes it in one instruction per 8 bytes (SSE4.2),
 * which matters because a run reply carries megabytes of outputs and both
 * ends checksum them on the evaluation's critical path (IEEE CRC-32 in
 * software cost about 1 ms per MB per side, half the sandbox's overhead).
 * Three ways to the same value: bitwise (no table: safe in the SIGSYS
 * handler), slicing-by-8 tables (portable), and the instruction. */
#define CRC32C_POLY 0x82f63b78u

static uint32_t crc32c_bitwise(uint32_t crc, const void *data, size_t len) {
  const uint8_t *p = data;
  crc = ~crc;
  for (size_t i = 0; i < len; i++) {
    crc ^= p[i];
    for (int k = 0; k < 8; k++)
      crc = (crc >> 1) ^ (CRC32C_POLY & -(crc & 1));
  }
  return ~crc;
}

static uint32_t crc_table[8][256];
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;
static int crc_hw; /* set once: the CPU has the SSE4.2 crc32 instruction */

static void crc_init(void) {
  for (uint32_t i = 0; i < 256; i++) {
    uint32_t c = i;
    for (int k = 0; k < 8; k++)
      c = (c >> 1) ^ (CRC32C_POLY & -(c & 1));
    crc_table[0][i] = c;
  }
  for (uint32_t i = 0; i < 256; i++)
    for (int t = 1; t < 8; t++)
      crc_table[t][i] =
          (crc_table[t - 1][i] >> 8) ^ crc_table[0][crc_table[t - 1][i] & 0xff];
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  __builtin_cpu_init();
  crc_hw = __builtin_cpu_supports("sse4.2");
#endif
}

uint32_t sbx_crc32c_portable(uint32_t crc, const void *data, size_t len) {
  pthread_once(&crc_once, crc_init);
  const uint8_t *p = data;
  crc = ~crc;
  while (len >= 8) {
    uint32_t lo = crc ^ ((uint32_t)p[0] | (uint32_t)p[1] << 8 |
                         (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24);
    crc = crc_table[7][lo & 0xff] ^ crc_table[6][(lo >> 8) & 0xff] ^
          crc_table[5][(lo >> 16) & 0xff] ^ crc_table[4][lo >> 24] ^
          crc_table[3][p[4]] ^ crc_table[2][p[5]] ^ crc_table[1][p[6]] ^
          crc_table[0][p[7]];
    p += 8;
    len -= 8;
  }
  while (len--)
    crc = (crc >> 8) ^ crc_table[0][(crc ^ *p++) & 0xff];
  return ~crc;
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
__attribute__((target("sse4.2"))) static uint32_t
crc32c_sse42(uint32_t crc, const void *data, size_t len) {
  const uint8_t *p = data;
  uint64_t c = ~crc;
  while (len >= 8) {
    uint64_t v;
    memcpy(&v, p, 8); /* unaligned payloads are fine */
    c = __builtin_ia32_crc32di(c, v);
    p += 8;
    len -= 8;
  }
  uint32_t c32 = (uint32_t)c;
  while (len--)
    c32 = __builtin_ia32_crc32qi(c32, *p++);
  return ~c32;
}
#endif

int sbx_crc32c_has_hw(void) {
  pthread_once(&crc_once, crc_init);
  return crc_hw;
}

uint32_t sbx_crc32c(uint32_t crc, const void *data, size_t len) {
  if (len < 16) return crc32c_bitwise(crc, data, len);
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  if (sbx_crc32c_has_hw()) return crc32c_sse42(crc, data, len);
#endif
  return sbx_crc32c_portable(crc, data, len);
}

double sbx_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int write_all(int fd, const void *p, size_t n) {
  const uint8_t *b = p;
  while (n > 0) {
    ssize_t w = write(fd, b, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return -1;
    b += w;
    n -= (size_t)w;
  }
  return 0;
}

int sbx_send(int fd, int type, const void *a, size_t alen, const void *b,
             size_t blen) {
  frame_header h = {
      SBX_MAGIC, SBX_PROTOCOL_VERSION, (uint16_t)type, alen + blen, 0, 0};
  h.crc = sbx_crc32c(sbx_crc32c(0, a, alen), b, blen);
  /* A small frame goes in one write: the reader then wakes once per
   * frame, not once for the header and again for the payload (a paced
   * launch's PACE and PACED are on the clock). Pipe writes of up to
   * PIPE_BUF bytes are atomic as well. */
  uint8_t small[512];
  if (sizeof h + alen + blen <= sizeof small) {
    memcpy(small, &h, sizeof h);
    if (alen) memcpy(small + sizeof h, a, alen);
    if (blen) memcpy(small + sizeof h + alen, b, blen);
    return write_all(fd, small, sizeof h + alen + blen);
  }
  if (write_all(fd, &h, sizeof h) != 0) return -1;
  if (alen && write_all(fd, a, alen) != 0) return -1;
  if (blen && write_all(fd, b, blen) != 0) return -1;
  return 0;
}

int sbx_send_ready(int fd, int confinement) {
  int32_t level = confinement;
  return sbx_send(fd, SBX_MSG_READY, &level, sizeof level, NULL, 0);
}

int sbx_ready_confinement(const uint8_t *msg, size_t len) {
  int32_t level = 0;
  if (len == sizeof level) memcpy(&level, msg, sizeof level);
  return level >= 1 && level <= 2 ? level : 0;
}

/* Reads exactly n bytes before deadline_ms (absolute, sbx_now_ms clock).
 * Returns 0, SBX_EOF, SBX_TIMEOUT or SBX_EBAD. */
static int read_all(int fd, void *p, size_t n, double deadline_ms) {
  uint8_t *b = p;
  while (n > 0) {
    double left = deadline_ms - sbx_now_ms();
    if (left <= 0) return SBX_TIMEOUT;
    struct pollfd pf = {fd, POLLIN, 0};
    int r = poll(&pf, 1, left > 1e9 ? -1 : (int)left + 1);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return SBX_EBAD;
    if (r == 0) continue;
    ssize_t got = read(fd, b, n);
    if (got < 0 && errno == EINTR) continue;
    if (got == 0) return SBX_EOF;
    if (got < 0) return SBX_EBAD;
    b += got;
    n -= (size_t)got;
  }
  return 0;
}

int sbx_recv(int fd, int *type, uint8_t **payload, size_t *len, size_t max_len,
             double deadline_ms) {
  *payload = NULL;
  *len = 0;
  frame_header h;
  int rc = read_all(fd, &h, sizeof h, deadline_ms);
  if (rc != 0) return rc;
  if (h.magic != SBX_MAGIC || h.version != SBX_PROTOCOL_VERSION ||
      h.len > max_len)
    return SBX_EBAD;
  uint8_t *p = malloc(h.len ? h.len : 1);
  if (!p) return SBX_EBAD;
  rc = read_all(fd, p, h.len, deadline_ms);
  if (rc == 0 && sbx_crc32c(0, p, h.len) != h.crc) rc = SBX_EBAD;
  if (rc != 0) {
    free(p);
    return rc;
  }
  *type = h.type;
  *payload = p;
  *len = h.len;
  return 0;
}

/* The trap report, written from the SIGSYS handler: only async-signal-safe
 * work (no allocation, no stdio). */
void sbx_send_trap(int fd, int syscall_nr) {
  int32_t nr = syscall_nr;
  frame_header h = {SBX_MAGIC, SBX_PROTOCOL_VERSION, SBX_MSG_TRAP, sizeof nr, 0,
                    0};
  h.crc = crc32c_bitwise(0, &nr, sizeof nr);
  uint8_t buf[sizeof h + sizeof nr];
  memcpy(buf, &h, sizeof h);
  memcpy(buf + sizeof h, &nr, sizeof nr);
  (void)!write(fd, buf, sizeof buf);
}
