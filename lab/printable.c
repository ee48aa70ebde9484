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

const char *lab_cell(const char *s, size_t len, int width, char *buf,
                     size_t cap) {
  char text[1024];
  printable(s, len, text, sizeof text, 0);
  /* the characters of text: every byte but UTF-8 continuation bytes */
  int chars = 0;
  for (const char *p = text; *p; p++)
    chars += ((unsigned char)*p & 0xC0) != 0x80;
  size_t o = 0;
  int shown = 0, keep = chars <= width ? chars : width - 1;
  for (const char *p = text; *p && o + 5 < cap;) {
    size_t n = 1;
    while (((unsigned char)p[n] & 0xC0) == 0x80)
      n++;
    if (shown == keep) break;
    memcpy(buf + o, p, n);
    o += n;
    p += n;
    shown++;
  }
  if (chars > width && width > 0 && o + 4 < cap) {
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
