/*
 * tests/unit/test_ipc.c — the sandbox's frames (sandbox/ipc.c): CRC-32C by
 * its three routes against the standard check value and one another, a
 * frame's round trip through a pipe, with each way a frame can be refused,
 * and a small frame sent in one write.
 */
#define _GNU_SOURCE
#include "sandbox/sandbox_internal.h"
#include "tests/unit/kltest.h"

#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* The definition, one bit at a time: the reference the fast routes meet. */
static uint32_t crc32c_reference(const uint8_t *p, size_t n) {
  uint32_t c = 0xffffffffu;
  for (size_t i = 0; i < n; i++) {
    c ^= p[i];
    for (int k = 0; k < 8; k++)
      c = (c >> 1) ^ (0x82f63b78u & -(c & 1));
  }
  return ~c;
}

static void test_crc(void) {
  /* The check value of CRC-32C (RFC 3720, and every CRC catalogue). */
  const char *nine = "123456789";
  CHECK(sbx_crc32c(0, nine, 9) == 0xe3069283u, "crc32c(123456789) = %08x",
        sbx_crc32c(0, nine, 9));
  CHECK(sbx_crc32c_portable(0, nine, 9) == 0xe3069283u, "portable: %08x",
        sbx_crc32c_portable(0, nine, 9));
  CHECK(sbx_crc32c(0, "", 0) == 0, "empty input gives 0");

  size_t big = 1 << 20;
  uint8_t *buf = malloc(big + 16);
  uint64_t x = 0x9e3779b97f4a7c15ull;
  for (size_t i = 0; i < big + 16; i++) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    buf[i] = (uint8_t)x;
  }
  /* Every length to 300 at every alignment to 7, then a megabyte. */
  int bad = 0;
  for (size_t off = 0; off < 8; off++)
    for (size_t n = 0; n <= 300; n++) {
      uint32_t want = crc32c_reference(buf + off, n);
      if (sbx_crc32c(0, buf + off, n) != want ||
          sbx_crc32c_portable(0, buf + off, n) != want)
        bad++;
    }
  CHECK(bad == 0, "%d (offset, length) pairs disagree with the definition",
        bad);
  uint32_t want = crc32c_reference(buf + 3, big);
  CHECK(sbx_crc32c(0, buf + 3, big) == want, "1 MiB: %08x, want %08x",
        sbx_crc32c(0, buf + 3, big), want);
  CHECK(sbx_crc32c_portable(0, buf + 3, big) == want, "1 MiB, portable");
  /* Continuation: crc(a then b) from crc(a). */
  CHECK(sbx_crc32c(sbx_crc32c(0, buf, 1000), buf + 1000, 5000) ==
            sbx_crc32c(0, buf, 6000),
        "continuing a CRC over a second buffer");
  printf("crc32c: %s route\n",
         sbx_crc32c_has_hw() ? "SSE4.2 instruction" : "table (no SSE4.2)");
  free(buf);
}

/* One frame written raw (header fields chosen by the test), then read. */
static int recv_raw(uint32_t magic, uint16_t version, uint64_t len,
                    uint32_t crc, const void *payload, size_t payload_len,
                    size_t max_len) {
  int p[2];
  if (pipe(p) != 0) return 99;
  struct {
    uint32_t magic;
    uint16_t version, type;
    uint64_t len;
    uint32_t crc, reserved;
  } h = {magic, version, SBX_MSG_RAN, len, crc, 0};
  CHECK(sizeof h == 24, "the header is 24 bytes");
  (void)!write(p[1], &h, sizeof h);
  if (payload_len) (void)!write(p[1], payload, payload_len);
  close(p[1]);
  int type;
  uint8_t *msg;
  size_t got;
  int rc = sbx_recv(p[0], &type, &msg, &got, max_len, sbx_now_ms() + 2000);
  free(msg);
  close(p[0]);
  return rc;
}

static void test_frames(void) {
  int p[2];
  CHECK(pipe(p) == 0, "pipe");
  const char a[] = "header part", b[] = "and the body";
  CHECK(sbx_send(p[1], SBX_MSG_RAN, a, sizeof a, b, sizeof b) == 0, "send");
  int type = 0;
  uint8_t *msg = NULL;
  size_t len = 0;
  int rc = sbx_recv(p[0], &type, &msg, &len, 1024, sbx_now_ms() + 2000);
  CHECK(rc == 0 && type == SBX_MSG_RAN && len == sizeof a + sizeof b,
        "round trip: rc %d type %d len %zu", rc, type, len);
  CHECK(msg && !memcmp(msg, a, sizeof a) &&
            !memcmp(msg + sizeof a, b, sizeof b),
        "payload arrives as sent");
  free(msg);

  /* Nothing written: the deadline, not a hang. */
  double t0 = sbx_now_ms();
  rc = sbx_recv(p[0], &type, &msg, &len, 1024, sbx_now_ms() + 100);
  CHECK(rc == SBX_TIMEOUT, "silence ends at the deadline: rc %d", rc);
  CHECK(sbx_now_ms() - t0 < 1500, "and soon after it");
  close(p[1]);
  rc = sbx_recv(p[0], &type, &msg, &len, 1024, sbx_now_ms() + 2000);
  CHECK(rc == SBX_EOF, "closed pipe: EOF, rc %d", rc);
  close(p[0]);

  const char body[] = "twelve bytes";
  uint32_t good = sbx_crc32c(0, body, 12);
  uint32_t magic = 0x31464c4bu;
  CHECK(recv_raw(magic, SBX_PROTOCOL_VERSION, 12, good, body, 12, 64) == 0,
        "a well-formed raw frame is accepted");
  CHECK(recv_raw(magic, SBX_PROTOCOL_VERSION, 12, good ^ 1, body, 12, 64) ==
            SBX_EBAD,
        "wrong checksum refused");
  CHECK(recv_raw(magic ^ 0xff, SBX_PROTOCOL_VERSION, 12, good, body, 12, 64) ==
            SBX_EBAD,
        "wrong magic refused");
  CHECK(recv_raw(magic, SBX_PROTOCOL_VERSION - 1, 12, good, body, 12, 64) ==
            SBX_EBAD,
        "an older protocol version refused");
  CHECK(recv_raw(magic, SBX_PROTOCOL_VERSION, 1ull << 40, good, body, 12, 64) ==
            SBX_EBAD,
        "a length over the caller's limit refused before allocating");
  CHECK(recv_raw(magic, SBX_PROTOCOL_VERSION, 12, good, body, 5, 64) == SBX_EOF,
        "a frame cut short ends in EOF");
}

/* A small frame is one write: on a SOCK_SEQPACKET socket, where each
 * write is a record of its own, one read takes header and payload
 * together (a reader woken by the header alone could sleep again for the
 * payload, on a paced batch's clock). A large frame still arrives whole
 * through a pipe. */
static void test_one_write(void) {
  int sp[2];
  CHECK(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sp) == 0, "socketpair");
  int32_t v[2] = {7, 3};
  CHECK(sbx_send(sp[1], SBX_MSG_PACE, v, sizeof v, NULL, 0) == 0, "send");
  uint8_t rec[256];
  ssize_t got = read(sp[0], rec, sizeof rec);
  CHECK(got == 24 + (ssize_t)sizeof v,
        "a PACE frame is one record of 32 bytes, read %zd", got);
  close(sp[0]);
  close(sp[1]);

  int p[2];
  CHECK(pipe(p) == 0, "pipe");
  static uint8_t big[8192];
  for (size_t i = 0; i < sizeof big; i++)
    big[i] = (uint8_t)(i * 31);
  CHECK(sbx_send(p[1], SBX_MSG_RAN, big, 3000, big + 3000, 3000) == 0,
        "send 6000 bytes");
  int type = 0;
  uint8_t *msg = NULL;
  size_t len = 0;
  int rc = sbx_recv(p[0], &type, &msg, &len, sizeof big, sbx_now_ms() + 2000);
  CHECK(rc == 0 && len == 6000 && msg && !memcmp(msg, big, 6000),
        "a large frame round trips: rc %d len %zu", rc, len);
  free(msg);
  close(p[0]);
  close(p[1]);
}

int main(void) {
  test_crc();
  test_frames();
  test_one_write();
  return kl_test_done("test_ipc");
}
