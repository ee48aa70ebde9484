/*
 * tests/unit/test_sha256.c — kl_sha256_* against the FIPS 180-4 example
 * vectors, in one piece and streamed in awkward chunk sizes (so every path
 * through the partial-block buffer runs). It does not test speed.
 */
#include "kernels/kernels.h"
#include "kltest.h"

#include <string.h>

static void kl_digest_hex(const uint8_t d[32], char out[65]) {
  for (int i = 0; i < 32; i++)
    sprintf(out + 2 * i, "%02x", d[i]);
}

/* Streams msg through update in chunks of the given sizes (cycled). */
static void kl_streamed(const char *msg, size_t len, const size_t *chunks,
                        int nchunks, char out[65]) {
  kl_sha256_ctx c;
  uint8_t d[32];
  kl_sha256_init(&c);
  for (size_t off = 0, i = 0; off < len; i++) {
    size_t n = chunks[i % (size_t)nchunks];
    if (n > len - off) n = len - off;
    kl_sha256_update(&c, msg + off, n);
    off += n;
  }
  kl_sha256_final(&c, d);
  kl_digest_hex(d, out);
}

int main(void) {
  static const struct {
    const char *msg, *hex;
  } v[] = {
      {"", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
      {"abc",
       "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
      {"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
       "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"},
      {"abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmno"
       "pjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu",
       "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1"},
  };
  char hex[65];
  for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
    kl_sha256_hex(v[i].msg, strlen(v[i].msg), hex);
    CHECK(strcmp(hex, v[i].hex) == 0, "vector %zu: got %s", i, hex);
    static const size_t ones[] = {1};
    kl_streamed(v[i].msg, strlen(v[i].msg), ones, 1, hex);
    CHECK(strcmp(hex, v[i].hex) == 0, "vector %zu bytewise: got %s", i, hex);
  }

  /* One million 'a', streamed in odd chunk sizes that straddle blocks. */
  size_t mlen = 1000000;
  char *m = malloc(mlen);
  CHECK(m != NULL, "malloc");
  if (m) {
    memset(m, 'a', mlen);
    static const size_t odd[] = {1, 63, 65, 7, 127, 1000, 3, 64, 4093};
    const char *want =
        "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0";
    kl_streamed(m, mlen, odd, (int)(sizeof odd / sizeof odd[0]), hex);
    CHECK(strcmp(hex, want) == 0, "million a (odd chunks): got %s", hex);
    kl_sha256_hex(m, mlen, hex);
    CHECK(strcmp(hex, want) == 0, "million a (one shot): got %s", hex);
    free(m);
  }

  /* Lengths around the padding boundary (55, 56, 63, 64 bytes) agree between
   * one-shot and bytewise hashing. */
  char buf[130];
  memset(buf, 'x', sizeof buf);
  for (size_t n = 50; n <= 130; n++) {
    char a[65], b[65];
    static const size_t ones[] = {1};
    kl_sha256_hex(buf, n, a);
    kl_streamed(buf, n, ones, 1, b);
    CHECK(strcmp(a, b) == 0, "length %zu: %s vs %s", n, a, b);
  }
  return kl_test_done("test_sha256");
}
