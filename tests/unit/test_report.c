/*
 * tests/unit/test_report.c — the HTML report (results/report.c) at the API
 * level: hostile text from a results file (sources, labels, statuses, flag
 * and component names, the config attribute) never becomes markup; a NUL in
 * a source is replaced; files with no steps and no candidates still give a
 * page that says so; a failed write is RES_EENV, not a crash.
 *
 * With `--write-hostile OUT.h5` it only writes the hostile results file and
 * exits: tests/integration/test_report.py renders it in Chromium and checks
 * the DOM (no script or img element, the source intact in its <pre>).
 */
#define _GNU_SOURCE /* strcasestr */
#include "kltest.h"
#include "results_gen.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

/* Every way out of a <pre> or an attribute we could think of, and a NUL. */
static const char hostile_src[] =
    "// </pre></details></td></tr></table><script>alert(1)</script>\n"
    "/* <img src=x onerror=alert(2)> <svg onload=alert(3)> */\n"
    "/* \"'><script src=http://evil.example/x.js></script> &amp; &lt; */\n"
    "/* <!-- --> <![CDATA[ ]]> <style>body{display:none}</style> */\n"
    "const char *nul = \"a\0b\";\n"
    "extern \"C\" __global__ void matmul() {}\n";

static const char *const hostile_flags[] = {
    "<script>alert(4)</script>", "canary\"><img src=x onerror=alert(5)>"};

static int write_hostile(const char *path, char *why, size_t whylen) {
  const res_campaign_meta meta = {
      .config = "return { note = '</pre><script>alert(6)</script>' }\n",
      .device = "<b>device</b>",
      .backend = "cpu-emu",
      .flag_names = hostile_flags,
      .n_flags = 2,
      .component_names = (const char *const[]){"<i>speed</i>"},
      .n_components = 1,
  };
  int code;
  res_file *f = res_open_append(path, &meta, &code, why, whylen);
  if (!f) return code;
  for (int i = 0; i < 3; i++) {
    res_candidate c;
    gen_candidate(i, &c);
    c.correct = c.compiled = 1;
    c.flags = 3;
    snprintf(c.label, sizeof c.label, "<script>alert(7)</script>%d.cu", i);
    snprintf(c.status, sizeof c.status, "ok<svg onload=alert(8)>");
    const char *names[] = {"<i>speed</i>", "\"><script>alert(9)</script>"};
    double values[] = {1.5, -0.5};
    double samples[] = {100.0 + i};
    int rc =
        res_append_candidate(f, &c, hostile_src, sizeof hostile_src - 1,
                             samples, 1, names, values, 2, NULL, why, whylen);
    if (rc != RES_OK) return rc;
  }
  res_step st;
  gen_step(0, &st);
  int rc = res_append_step(f, &st, why, whylen);
  if (rc != RES_OK) return rc;
  return res_close(f, why, whylen);
}

/* Renders path's report into a malloc'd string (caller frees); *len gets
 * its length in bytes (which may exceed strlen if a NUL slipped out). */
static char *render(const char *path, size_t *len) {
  char why[512];
  int code;
  res_reader *r = res_open_read(path, &code, why, sizeof why);
  CHECK(r, "open %s: %s", path, why);
  if (!r) return NULL;
  char *buf = NULL;
  FILE *f = open_memstream(&buf, len);
  res_report_opts o = {.title = "<script>alert(10)</script>.h5", .top_n = 50};
  int rc = res_report_html(r, &o, f, why, sizeof why);
  CHECK(rc == RES_OK, "report: %s", why);
  fclose(f);
  res_reader_close(r);
  return buf;
}

static int count(const char *hay, const char *needle) {
  int n = 0;
  for (const char *p = hay; (p = strstr(p, needle)); p++)
    n++;
  return n;
}

static void test_hostile(const char *dir) {
  char path[512], why[512] = "";
  snprintf(path, sizeof path, "%s/hostile.h5", dir);
  CHECK(write_hostile(path, why, sizeof why) == RES_OK, "write: %s", why);
  size_t len = 0;
  char *html = render(path, &len);
  if (!html) return;
  CHECK(strlen(html) == len, "no NUL byte in the page");
  /* What the file tried to inject, raw; the page's own markup (its <b>,
   * its <style>) is not. */
  const char *banned[] = {
      "<script",   "<img",    "<svg onload",         "<i>",
      "<b>device", "<!--",    "<style>body{display", "\"><script",
      "\"><img",   "<![CDATA"};
  for (size_t i = 0; i < sizeof banned / sizeof *banned; i++)
    CHECK(!strcasestr(html, banned[i]), "page contains raw %s", banned[i]);
  CHECK(count(html, "<pre>") == count(html, "</pre>"), "<pre> balanced");
  CHECK(count(html, "<details>") == count(html, "</details>"),
        "<details> balanced");
  CHECK(count(html, "<tr class=\"cand") == 3, "three leaderboard rows");
  CHECK(count(html, "<pre>// &lt;/pre&gt;&lt;/details&gt;&lt;/td&gt;&lt;/"
                    "tr&gt;&lt;/table&gt;&lt;script&gt;alert(1)") == 1,
        "the source shown escaped, once");
  CHECK(count(html, "(the source of candidate ") == 2,
        "the two rows of the same source name the first");
  CHECK(strstr(html, "&quot;a&#xFFFD;b&quot;"), "NUL shown as U+FFFD");
  CHECK(strstr(html, "&lt;script&gt;alert(4)&lt;/script&gt;"),
        "flag name escaped");
  CHECK(strstr(html, "canary&quot;&gt;&lt;img"), "quote in a name escaped");
  CHECK(strstr(html, "&lt;/pre&gt;&lt;script&gt;alert(6)"), "config escaped");
  CHECK(strstr(html, "Content-Security-Policy"), "CSP meta present");
  free(html);
}

static void test_empty(const char *dir) {
  char path[512], why[512] = "";
  snprintf(path, sizeof path, "%s/empty.h5", dir);
  const res_campaign_meta meta = {.backend = "cpu-emu"};
  int code;
  res_file *f = res_open_append(path, &meta, &code, why, sizeof why);
  CHECK(f, "create: %s", why);
  if (!f) return;
  CHECK(res_close(f, why, sizeof why) == RES_OK, "close: %s", why);
  size_t len = 0;
  char *html = render(path, &len);
  if (!html) return;
  CHECK(strstr(html, "holds no candidates"), "says: no candidates");
  CHECK(strstr(html, "holds no policy steps"), "says: no steps");
  CHECK(count(html, "<p class=\"empty\">") >= 6, "each plot says it is empty");
  CHECK(!strstr(html, "<svg"), "no plot drawn without data");
  CHECK(strstr(html, "</html>"), "page complete");
  free(html);
}

static void test_write_failure(const char *dir) {
  char path[512], why[512] = "";
  snprintf(path, sizeof path, "%s/run.h5", dir);
  int code;
  const res_campaign_meta meta = {.backend = "cpu-emu"};
  res_file *w = res_open_append(path, &meta, &code, why, sizeof why);
  CHECK(w, "create: %s", why);
  if (!w) return;
  for (int i = 0; i < 20; i++)
    gen_append(w, i, why, sizeof why);
  res_close(w, why, sizeof why);
  res_reader *r = res_open_read(path, &code, why, sizeof why);
  FILE *full = fopen("/dev/full", "w");
  if (!r || !full) {
    if (r) res_reader_close(r);
    if (full) fclose(full);
    return; /* no /dev/full here: nothing to inject */
  }
  res_report_opts o = {.title = "run.h5"};
  why[0] = 0;
  CHECK(res_report_html(r, &o, full, why, sizeof why) == RES_EENV,
        "a full disk is RES_EENV");
  CHECK(strstr(why, "write failed"), "reason names the write: %s", why);
  fclose(full);
  res_reader_close(r);
}

/* Values at magnitudes where a tick spacing adds nothing to a double
 * (steps near 2^60, times near 1e20, an infinite time): the page is
 * finite and small, and no axis reads NaN. The plots once added the
 * spacing until past the end, for ever. */
static void test_huge_axes(const char *dir) {
  char path[512], why[512] = "";
  snprintf(path, sizeof path, "%s/huge.h5", dir);
  int code = 0;
  res_file *w = res_create(path, NULL, &code, why, sizeof why);
  CHECK(w, "create: %s", why);
  for (int i = 0; w && i < 30; i++) {
    res_candidate c;
    gen_candidate(i, &c);
    c.step = (1ll << 60) + (i == 29 ? 256 : 0);
    c.correct = 1;
    c.flags = 0;
    c.time_us = i == 28 ? INFINITY : 1e20 + (i == 29 ? 16384 : 0);
    char src[64];
    size_t len = (size_t)snprintf(src, sizeof src, "// %d\n", i);
    double samples[2] = {1e20, 1e20};
    CHECK(res_append_candidate(w, &c, src, len, samples, 2, NULL, NULL, 0, NULL,
                               why, sizeof why) == RES_OK,
          "append %d: %s", i, why);
  }
  res_close(w, why, sizeof why);
  size_t len = 0;
  char *html = render(path, &len);
  if (!html) return;
  CHECK(len < 2000000, "a page of %zu bytes", len);
  CHECK(!strstr(html, "nan\""), "no NaN coordinate");
  free(html);
}

/* Ranges a plot cannot span as they are: every correct time equal at
 * 1e20 (the histogram padded its range by 0.5, which at 1e20 is nothing,
 * and drew x="-nan"), and rewards and components at +-1e308 (the axis
 * span overflowed to inf). No coordinate may be NaN or infinite. */
static void test_degenerate_axes(const char *dir) {
  char path[512], why[512] = "";
  snprintf(path, sizeof path, "%s/degenerate.h5", dir);
  int code = 0;
  const res_campaign_meta m = {.component_names = (const char *const[]){"c"},
                               .n_components = 1};
  res_file *w = res_create(path, &m, &code, why, sizeof why);
  CHECK(w, "create: %s", why);
  for (int i = 0; w && i < 12; i++) {
    res_candidate c;
    gen_candidate(i, &c);
    c.correct = c.compiled = 1;
    c.time_us = 1e20;
    c.reward = i % 2 ? 1e308 : -1e308;
    const char *names[1] = {"c"};
    double v = i % 2 ? -1e308 : 1e308;
    CHECK(res_append_candidate(w, &c, "x", 1, NULL, 0, names, &v, 1, NULL, why,
                               sizeof why) == RES_OK,
          "append %d: %s", i, why);
  }
  for (int s = 0; w && s < 2; s++) {
    res_step st;
    gen_step(s, &st);
    st.reward_mean = s ? 1e308 : -1e308;
    st.reward_max = s ? -1e308 : 1e308;
    CHECK(res_append_step(w, &st, why, sizeof why) == RES_OK, "step: %s", why);
  }
  res_close(w, why, sizeof why);
  size_t len = 0;
  char *html = render(path, &len);
  if (!html) return;
  CHECK(!strstr(html, "nan\"") && !strstr(html, "inf\""),
        "no NaN or infinite coordinate");
  CHECK(count(html, "<rect class=\"bar\"") >= 5, "the histogram is drawn");
  free(html);
}

int main(int argc, char **argv) {
  char why[512] = "";
  if (argc == 3 && !strcmp(argv[1], "--write-hostile")) {
    unlink(argv[2]);
    int rc = write_hostile(argv[2], why, sizeof why);
    if (rc != RES_OK) fprintf(stderr, "test_report: %s\n", why);
    return rc;
  }
  char dir[] = "/tmp/kl_test_report_XXXXXX";
  if (!mkdtemp(dir)) return 3;
  test_hostile(dir);
  test_empty(dir);
  test_write_failure(dir);
  test_huge_axes(dir);
  test_degenerate_axes(dir);
  char cmd[600];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
  return kl_test_done("test_report");
}
