/*
 * tests/unit/test_printable.c — terminal-safe text and table cells
 * (lab/printable.c, linked in by tests/CMakeLists.txt): a cell is exactly
 * its width in characters, a cut value ends in an ellipsis, and a cut never
 * splits a UTF-8 character or lets a control byte through.
 */
#include "lab/lab.h"
#include "tests/unit/kltest.h"

#include <string.h>

/* The characters of s: every byte but UTF-8 continuation bytes. */
static int chars(const char *s) {
  int n = 0;
  for (; *s; s++)
    n += ((unsigned char)*s & 0xC0) != 0x80;
  return n;
}

static void test_cell(void) {
  char b[4 * 34 + 1];
  /* shorter: padded */
  CHECK(!strcmp(lab_cell("ok", 2, 6, b, sizeof b), "ok    "), "'%s'", b);
  /* exactly the width: as it is, no ellipsis */
  CHECK(!strcmp(lab_cell("timeout", 7, 7, b, sizeof b), "timeout"), "'%s'", b);
  /* one longer: the last character gives way to the ellipsis (the table
   * showed "crashed:SIGSEG", which reads as a status of its own) */
  lab_cell("crashed:SIGSEGV", 15, 14, b, sizeof b);
  CHECK(!strcmp(b, "crashed:SIGSE\xE2\x80\xA6"), "'%s'", b);
  CHECK(chars(b) == 14, "%d characters", chars(b));
  /* len bounds the text as in lab_printable; a NUL ends it */
  CHECK(!strcmp(lab_cell("wrong\0junk", 10, 6, b, sizeof b), "wrong "), "'%s'",
        b);
  CHECK(!strcmp(lab_cell("wrongly", 5, 6, b, sizeof b), "wrong "), "'%s'", b);
  /* multi-byte characters count once and are never split: 'é' is 2 bytes,
   * 'ж' 2, '€' 3; a byte cut of 14 fell inside one of them */
  const char *name =
      "\xC3\xA9t\xC3\xA9_\xD0\xB6\xE2\x82\xAC_kernel_long_name.cu";
  for (int w = 1; w <= 30; w++) {
    lab_cell(name, strlen(name), w, b, sizeof b);
    CHECK(chars(b) == w, "width %d: %d characters in '%s'", w, chars(b), b);
    /* valid UTF-8 throughout: every lead byte has its continuation bytes */
    for (const unsigned char *p = (const unsigned char *)b; *p;) {
      int n = *p < 0x80 ? 1 : *p >= 0xF0 ? 4 : *p >= 0xE0 ? 3 : 2;
      int ok = *p < 0x80 || *p >= 0xC2;
      for (int k = 1; k < n; k++)
        ok &= (p[k] & 0xC0) == 0x80;
      CHECK(ok, "width %d: broken UTF-8 at byte %d of '%s'", w,
            (int)(p - (const unsigned char *)b), b);
      if (!ok) break;
      p += n;
    }
  }
  lab_cell(name, strlen(name), 5, b, sizeof b);
  CHECK(!strcmp(b, "\xC3\xA9t\xC3\xA9_\xE2\x80\xA6"), "'%s'", b);
  /* control bytes become '?' before the cut: an escape sequence cannot
   * reach the terminal through a cell */
  lab_cell("\x1b[2Jx", 5, 8, b, sizeof b);
  CHECK(!strcmp(b, "?[2Jx   "), "'%s'", b);
  /* widths are terminal columns: a CJK character takes two (a name of them
   * shifted its row), a combining mark none */
  const char *cjk = "\xE5\x86\x85\xE6\xA0\xB8.cu"; /* 内核.cu: 7 columns */
  CHECK(!strcmp(lab_cell(cjk, strlen(cjk), 8, b, sizeof b),
                "\xE5\x86\x85\xE6\xA0\xB8.cu "),
        "'%s'", b);
  CHECK(!strcmp(lab_cell(cjk, strlen(cjk), 6, b, sizeof b),
                "\xE5\x86\x85\xE6\xA0\xB8.\xE2\x80\xA6"),
        "'%s'", b);
  /* the second wide character does not fit the 3 columns before the
   * ellipsis: a space pads the fourth */
  CHECK(!strcmp(lab_cell(cjk, strlen(cjk), 4, b, sizeof b),
                "\xE5\x86\x85\xE2\x80\xA6 "),
        "'%s'", b);
  const char *comb = "e\xCC\x81t"; /* e, U+0301, t: 2 columns */
  CHECK(!strcmp(lab_cell(comb, strlen(comb), 2, b, sizeof b), comb), "'%s'", b);
  CHECK(!strcmp(lab_cell(comb, strlen(comb), 3, b, sizeof b), "e\xCC\x81t "),
        "'%s'", b);
  /* a buffer too small for the width: cut short, still terminated */
  char small[8];
  lab_cell("abcdefghijkl", 12, 20, small, sizeof small);
  CHECK(strlen(small) < sizeof small, "'%s'", small);
}

int main(void) {
  test_cell();
  return kl_test_done("test_printable");
}
