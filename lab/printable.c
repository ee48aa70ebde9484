/*
 * lab/printable.c — text from files and policies made safe for a terminal
 * (lab_printable, lab_printable_line, lab_cell, lab_fput_printable;
 * lab/lab.h says what each does). Its own file so that what links only
 * part of the lab (test_policy_matmul) can show a results file's labels
 * too.
 */
#include "lab/lab.h"

#include "results/results.h"

#include <stdio.h>
#include <string.h>

/* The bytes of the character at s (len available) when a terminal may be
 * shown it, else 0 (a C0 control other than newline and tab when
 * keep_lines, DEL, a C1 control, a direction control (res_bidi_control),
 * or bytes that are not UTF-8). */
static size_t printable_char(const char *s, size_t len, int keep_lines) {
  unsigned char c = (unsigned char)s[0];
  if (c >= 0x80) {
    size_t n = res_utf8_char(s, len < 4 ? len : 4);
    /* C1 controls, U+0080..U+009F: U+009B is CSI to many terminals (a lone
     * 0x9b byte is no UTF-8, so it never gets here); and the direction
     * controls, which reorder what is shown */
    return (n == 2 && c == 0xC2 && (unsigned char)s[1] < 0xA0) ||
                   (n && res_bidi_control(s, n))
               ? 0
               : n;
  }
  if (c == 0x7f || (c < 0x20 && !(keep_lines && (c == '\n' || c == '\t'))))
    return 0;
  return 1;
}

static const char *printable(const char *s, size_t len, char *buf, size_t cap,
                             int tabs) {
  size_t o = 0;
  for (size_t i = 0; i < len && s[i] && o + 5 < cap;) {
    size_t n =
        printable_char(s + i, strnlen(s + i, len - i < 4 ? len - i : 4), tabs);
    if (tabs && s[i] == '\n') n = 0; /* a line: no newline in it */
    if (!n) {
      buf[o++] = '?';
      i++;
    } else {
      memcpy(buf + o, s + i, n);
      o += n;
      i += n;
    }
  }
  buf[o] = 0;
  return buf;
}

const char *lab_printable(const char *s, size_t len, char *buf, size_t cap) {
  return printable(s, len, buf, cap, 0);
}

const char *lab_printable_line(const char *s, size_t len, char *buf,
                               size_t cap) {
  return printable(s, len, buf, cap, 1);
}

/* The code point of the UTF-8 character of n bytes at s (valid: it passed
 * printable_char). */
static unsigned code_point(const unsigned char *s, size_t n) {
  if (n == 1) return s[0];
  unsigned cp = s[0] & (0x7F >> n);
  for (size_t k = 1; k < n; k++)
    cp = cp << 6 | (s[k] & 0x3F);
  return cp;
}

/* The columns a terminal gives code point cp: 0 for combining marks and
 * zero-width characters, 2 for East Asian wide and fullwidth ones (the
 * blocks wcwidth gives 2, without asking the locale, which the lab never
 * sets), else 1. */
static int columns(unsigned cp) {
  static const unsigned zero[][2] = {
      {0x0300, 0x036F}, {0x0483, 0x0489}, {0x0591, 0x05BD}, {0x0610, 0x061A},
      {0x064B, 0x065F}, {0x1AB0, 0x1AFF}, {0x1DC0, 0x1DFF}, {0x200B, 0x200F},
      {0x20D0, 0x20FF}, {0xFE00, 0xFE0F}, {0xFE20, 0xFE2F}, {0xFEFF, 0xFEFF},
  };
  static const unsigned wide[][2] = {
      {0x1100, 0x115F},   {0x231A, 0x231B},   {0x2329, 0x232A},
      {0x2E80, 0x303E},   {0x3041, 0x33FF},   {0x3400, 0x4DBF},
      {0x4E00, 0x9FFF},   {0xA000, 0xA4CF},   {0xA960, 0xA97F},
      {0xAC00, 0xD7A3},   {0xF900, 0xFAFF},   {0xFE10, 0xFE19},
      {0xFE30, 0xFE6F},   {0xFF00, 0xFF60},   {0xFFE0, 0xFFE6},
      {0x1F300, 0x1F64F}, {0x1F900, 0x1F9FF}, {0x20000, 0x3FFFD},
  };
  for (size_t i = 0; i < sizeof zero / sizeof zero[0]; i++)
    if (cp >= zero[i][0] && cp <= zero[i][1]) return 0;
  for (size_t i = 0; i < sizeof wide / sizeof wide[0]; i++)
    if (cp >= wide[i][0] && cp <= wide[i][1]) return 2;
  return 1;
}

/* The bytes of the character at p (NUL-terminated, valid UTF-8), and its
 * columns in *cols. */
static size_t char_at(const char *p, int *cols) {
  size_t n = 1;
  while (((unsigned char)p[n] & 0xC0) == 0x80)
    n++;
  *cols = columns(code_point((const unsigned char *)p, n));
  return n;
}

const char *lab_cell(const char *s, size_t len, int width, char *buf,
                     size_t cap) {
  char text[1024];
  printable(s, len, text, sizeof text, 0);
  int total = 0, cols;
  for (const char *p = text; *p; total += cols)
    p += char_at(p, &cols);
  /* all of it when it fits, else what fits in width - 1 columns and the
   * ellipsis */
  const int room = total <= width ? width : width - 1;
  size_t o = 0;
  int shown = 0;
  for (const char *p = text; *p;) {
    size_t n = char_at(p, &cols);
    if (shown + cols > room || o + n + 4 >= cap) break;
    memcpy(buf + o, p, n);
    o += n;
    p += n;
    shown += cols;
  }
  if (total > width && width > 0 && o + 4 < cap) {
    memcpy(buf + o, "\xE2\x80\xA6", 3); /* U+2026, the ellipsis */
    o += 3;
    shown++;
  }
  while (shown < width && o + 1 < cap) {
    buf[o++] = ' ';
    shown++;
  }
  buf[o] = 0;
  return buf;
}

void lab_fput_printable(const char *s, size_t len, FILE *f) {
  for (size_t i = 0; i < len;) {
    size_t n = printable_char(s + i, len - i, 1);
    if (!n)
      fputc('?', f);
    else
      fwrite(s + i, 1, n, f);
    i += n ? n : 1;
  }
}
