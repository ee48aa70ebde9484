#!/usr/bin/env python3
"""tests/integration/test_report.py — `kernlab report RUN.h5 -o report.html`
end to end, and the page as a browser shows it.

usage: test_report.py KERNLAB RESULTS_FIXTURE TEST_REPORT
RESULTS_FIXTURE (tests/results_fixture.c) writes 30 synthetic candidates
(tests/unit/results_gen.h says what each holds: 21 correct, steps 0-2, three
reward components); `TEST_REPORT --write-hostile OUT.h5`
(tests/unit/test_report.c) writes a file whose sources, labels, statuses and
names try to break out of the page.

Without a browser: the command's exit codes and messages, that the page is
self-contained (no script, no URL, a CSP that forbids fetching), and that a
bad file leaves no output behind. With Debian's headless Chromium: the DOM
it built (plots as SVG, polylines with one point per step, histogram bars
that add up to the correct kernels, leaderboard rows with sources in
<details>, hostile text left as text) and a screenshot (a 1200x2000 PNG,
decoded here with zlib, that is not blank and shows the plots' colours).
The Chromium part exits 77 (ctest: skipped) with a message only when no
chromium is installed. Standard library only. Prints "N passed, N failed".
"""
import html.parser
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import zlib

KERNLAB, FIXTURE, TEST_REPORT = sys.argv[1], sys.argv[2], sys.argv[3]
import kltest  # noqa: E402
from kltest import check  # noqa: E402




def kernlab(*args):
    p = subprocess.run([KERNLAB, *args], capture_output=True, text=True,
                       timeout=120)
    return p.returncode, p.stdout, p.stderr


def report(run, out, *extra):
    rc, so, se = kernlab("report", run, "-o", out, *extra)
    check(rc == 0, "report %s exits 0, got %d: %s" % (run, rc, se))
    return open(out, encoding="utf-8").read() if rc == 0 else ""


# ---- a small DOM, from html.parser ----------------------------------------

class Node:
    def __init__(self, tag, attrs, parent):
        self.tag, self.attrs, self.parent = tag, dict(attrs), parent
        self.children, self.text = [], []

    def all(self, tag=None, cls=None):
        for c in self.children:
            if (tag is None or c.tag == tag) and (
                    cls is None or cls in c.attrs.get("class", "").split()):
                yield c
            yield from c.all(tag, cls)

    def inner_text(self):
        return "".join(self.text) + "".join(c.inner_text()
                                            for c in self.children)


VOID = {"meta", "br", "img", "input", "link", "hr", "rect", "line",
        "polyline", "circle", "path", "area", "base", "col", "wbr"}


class DomBuilder(html.parser.HTMLParser):
    """Builds a tree; an element's text is kept in document order only as
    far as inner_text needs (text before children), which is enough for
    <pre>, whose content has no children when escaping works."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.root = Node("#root", [], None)
        self.cur = self.root

    def handle_starttag(self, tag, attrs):
        n = Node(tag, attrs, self.cur)
        self.cur.children.append(n)
        if tag not in VOID:
            self.cur = n

    def handle_startendtag(self, tag, attrs):
        self.cur.children.append(Node(tag, attrs, self.cur))

    def handle_endtag(self, tag):
        n = self.cur
        while n is not self.root and n.tag != tag:
            n = n.parent
        if n is not self.root:
            self.cur = n.parent

    def handle_data(self, data):
        self.cur.text.append(data)


def dom(text):
    b = DomBuilder()
    b.feed(text)
    b.close()
    return b.root


# ---- checks that need no browser ------------------------------------------

def test_cli(run, tmp):
    out = os.path.join(tmp, "report.html")
    page = report(run, out)
    check(page.startswith("<!DOCTYPE html>") and page.rstrip().endswith(
        "</html>"), "a complete HTML document")
    rc, so, se = kernlab("report", run, "-o", out)
    check(rc == 0 and so == "" and se == "", "nothing on stdout or stderr")
    low = page.lower()
    check("<script" not in low, "no script")
    check("http:" not in low and "https:" not in low, "no URL at all")
    check(" src=" not in low and " href=" not in low, "no src/href attribute")
    check("@import" not in low and "url(" not in low, "no CSS fetch")
    check("content-security-policy" in low and "default-src 'none'" in page,
          "a CSP that forbids fetching")
    check(oct(os.stat(out).st_mode & 0o777) != oct(0o600),
          "report is not left 0600 by mkstemp")
    check(not [f for f in os.listdir(tmp) if ".tmp." in f], "no temp left")
    rc, so, _ = kernlab("report", run, "-o", "-", "-n", "2")
    check(rc == 0 and so.count('<tr class="cand') == 2, "-o - and -n 2")
    for bad in (["-n", "0"], ["-n", "x"], ["--bogus"]):
        rc, _, se = kernlab("report", run, "-o", out, *bad)
        check(rc == 2 and "usage:" in se, "report %s: usage error 2" % bad)
    # A second file is one to compare with: a missing one is a bad file.
    extra = os.path.join(tmp, "extra.html")
    rc, _, se = kernlab("report", run, "no-such-run.h5", "-o", extra)
    check(rc == 2 and "no-such-run.h5" in se and se.count("\n") == 1 and
          not os.path.exists(extra),
          "a missing second file: one line naming it, exit 2, no page: %r" % se)
    rc, _, se = kernlab("report", run)
    check(rc == 2 and "-o" in se, "no -o: usage error naming -o")
    rc, _, se = kernlab("report")
    check(rc == 2 and "usage:" in se, "no file: usage")
    # a missing folder is made (`-o runs/quick.html` before runs/ exists),
    # as every command's output folder is; it was exit 2
    made = os.path.join(tmp, "no", "such", "dir.html")
    rc, _, se = kernlab("report", run, "-o", made)
    check(rc == 0 and os.path.isfile(made), "-o in a missing folder: made: %d %r" % (rc, se))
    rc, _, se = kernlab("report", run, "-o", os.path.join(out, "dir.html"))
    check(rc == 2 and se.count("\n") == 1 and out + " is a file, not a folder" in se,
          "unwritable output (under a file): one line naming the file, 2: %r" % se)
    rc, _, se = kernlab("report", run, "-o", tmp)
    check(rc == 2 and se.count("\n") == 1 and "is a folder" in se,
          "a folder as output: one line, exit 2: %r" % se)


def test_bad_files(run, tmp):
    text = os.path.join(tmp, "notes.h5")
    open(text, "w").write("these are notes, not HDF5\n")
    empty = os.path.join(tmp, "empty.h5")
    open(empty, "w").close()
    trunc = os.path.join(tmp, "truncated.h5")
    data = open(run, "rb").read()
    open(trunc, "wb").write(data[: len(data) // 2])
    cases = [(text, "not an HDF5 file"), (empty, "not an HDF5 file"),
             (trunc, "truncated"),
             (os.path.join(tmp, "missing.h5"), "No such file"),
             (tmp, "is a directory")]
    for path, needle in cases:
        out = os.path.join(tmp, "bad.html")
        rc, so, se = kernlab("report", path, "-o", out)
        name = "report %s" % os.path.basename(path)
        check(rc == 2, "%s: exit 2, got %d" % (name, rc))
        check(needle in se, "%s: message names %r: %s" % (name, needle, se))
        check(se.count("\n") == 1, "%s: one line: %r" % (name, se))
        check(so == "" and not os.path.exists(out), "%s: no output" % name)


# ---- Chromium ---------------------------------------------------------------

def find_chromium():
    for name in (os.environ.get("CHROMIUM"), "chromium", "chromium-browser"):
        if name and shutil.which(name):
            return shutil.which(name)
    return None


def chromium(exe, page, *args):
    """Runs headless Chromium on a local page with the flags the machine
    probe used (a fresh profile, no background networking)."""
    with tempfile.TemporaryDirectory() as profile:
        p = subprocess.run(
            [exe, "--headless", "--no-sandbox", "--disable-gpu",
             "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update",
             "--disable-sync", "--user-data-dir=" + profile, *args,
             "file://" + os.path.abspath(page)],
            capture_output=True, text=True, timeout=180)
    return p.returncode, p.stdout, p.stderr


def points(poly):
    return [tuple(map(float, p.split(",")))
            for p in poly.attrs.get("points", "").split()]


def decode_png(path):
    """(width, height, rows of RGB tuples) of an 8-bit RGB/RGBA PNG."""
    data = open(path, "rb").read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "PNG signature"
    pos, idat, w = 8, b"", 0
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            w, h, depth, ctype = struct.unpack(">IIBB", body[:10])
            assert depth == 8 and ctype in (2, 6), "8-bit RGB(A)"
            bpp = 3 if ctype == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    raw, stride, rows, prev = zlib.decompress(idat), w * bpp, [], None
    prev = bytearray(stride)
    for y in range(h):
        f, line = raw[y * (stride + 1)], bytearray(
            raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b, c = prev[i], prev[i - bpp] if i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                pr = a if pa <= pb and pa <= pc else b if pb <= pc else c
                line[i] = (line[i] + pr) & 255
        rows.append([tuple(line[i:i + 3]) for i in range(0, stride, bpp)])
        prev = line
    return w, h, rows


def test_dom(exe, run, tmp):
    page = os.path.join(tmp, "report.html")
    report(run, page)
    rc, out, err = chromium(exe, page, "--dump-dom")
    check(rc == 0 and "<svg" in out, "chromium dumps the DOM: %s" % err[-300:])
    d = dom(out)
    charts = {s.attrs.get("data-plot"): s for s in d.all("svg", "chart")}
    check(sorted(charts) == ["best", "components", "correct", "hist",
                             "reward", "stacked"],
          "six plots: %s" % sorted(charts))
    series = {p.attrs["data-series"]: p for p in d.all("polyline", "series")}
    for key in ("reward_mean", "reward_max", "correct_frac", "best_time_us"):
        pts = points(series[key]) if key in series else []
        check(len(pts) == 3, "%s: one point per step (3), got %d"
              % (key, len(pts)))
        check([x for x, _ in pts] == sorted(x for x, _ in pts),
              "%s: x grows with the step" % key)
    # results_gen.h: reward_mean = step, reward_max = step + 2 (higher on
    # the page, i.e. smaller y), best time grows 100, 101, 102 us.
    mean, mx = points(series["reward_mean"]), points(series["reward_max"])
    check(all(a[1] > b[1] for a, b in zip(mean, mx)), "max above mean")
    check(mean[0][1] > mean[1][1] > mean[2][1], "mean rises step by step")
    best = points(series["best_time_us"])
    check(best[0][1] > best[2][1], "best time plotted rising (100 -> 102)")
    bars = list(d.all("rect", "bar"))
    check(sum(int(b.attrs["data-count"]) for b in bars) == 21,
          "histogram holds the 21 correct kernels")
    check(5 <= len(bars) <= 30, "5 to 30 histogram bins: %d" % len(bars))
    dots = list(charts["best"].all("circle", "cand")) if "best" in charts \
        else []
    check(len(dots) == 21, "a dot per correct kernel: %d" % len(dots))
    comps = list(d.all("rect", "comp"))
    check(len(comps) == 3, "a bar per reward component")
    # speed_bonus (from candidate 10): mean of 3i - 0.5 over i = 10..29.
    check(abs(float(comps[2].attrs["data-mean"]) - 58.0) < 1e-3,
          "speed_bonus mean 58: %s" % comps[2].attrs.get("data-mean"))
    stacks = [g.attrs["data-id"] for g in d.all("g", "stack")]
    check(stacks == [str(i) for i in range(29, 17, -1)],
          "stacked bars: top 12 by reward: %s" % stacks)
    rows = list(d.all("tr", "cand"))
    check(len(rows) == 21, "21 leaderboard rows, got %d" % len(rows))
    check(rows and rows[0].attrs["data-id"] == "0", "fastest is id 0")
    check(len([r for r in rows if "flagged" in r.attrs["class"]]) == 4,
          "the 4 flagged correct kernels (8, 10, 17, 21) marked")
    details = [x for x in d.all("details")
               if x.parent.tag == "td"]
    check(len(details) == 21, "a <details> with the source per row")
    rc, src, _ = kernlab("show", run, "0", "--source")
    pre = next(details[0].all("pre"), None) if details else None
    check(pre is not None and pre.inner_text() == src,
          "row 1's source is candidate 0's")
    for word in ("canary_touched", "nan_output", "sample-0.cu",
                 "CPU emulator"):
        check(word in out, "page mentions %s" % word)


def test_compare(exe, run, tmp):
    """Two files: the comparison plot, one staircase per file, the legend
    naming both, a table row each; then the first file's usual plots."""
    other = os.path.join(tmp, "other.h5")
    subprocess.run([FIXTURE, other, "5"], check=True, timeout=60)
    page = os.path.join(tmp, "compare.html")
    rc, _, se = kernlab("report", run, other, "-o", page)
    check(rc == 0, "report on two files exits 0: %s" % se)
    rc, out, err = chromium(exe, page, "--dump-dom")
    check(rc == 0, "chromium on the comparison page: %s" % err[-300:])
    d = dom(out)
    charts = [s.attrs.get("data-plot") for s in d.all("svg", "chart")]
    check(sorted(charts) == ["best", "compare", "components", "correct",
                             "hist", "reward", "stacked"],
          "the comparison plot and the first file's six: %s" % charts)
    lines = {p.attrs["data-series"]: p for p in d.all("polyline", "series")
             if p.attrs.get("data-series", "").startswith("compare-")}
    check(sorted(lines) == ["compare-0", "compare-1"], "one line per file: %s"
          % sorted(lines))
    check([lines[k].attrs.get("data-evaluations") for k in sorted(lines)] ==
          ["30", "5"], "each line spans its file's candidates")
    pts = points(lines["compare-0"]) if "compare-0" in lines else []
    # SVG y grows downwards: a time that never rises is a y that never
    # falls.
    check(pts and all(b[0] >= a[0] and b[1] >= a[1] - 0.05
                      for a, b in zip(pts, pts[1:])),
          "best so far never gets worse (x grows, time never rises): %s"
          % pts[:6])
    legend = [li.inner_text().strip() for li in d.all("li")
              if li.attrs.get("data-series", "").startswith("compare-")]
    check(legend == [run, other], "legend names the files: %s" % legend)
    rows = list(d.all("tr", "file"))
    check(len(rows) == 2, "a table row per file: %d" % len(rows))
    check(len(list(d.all("tr", "cand"))) == 21,
          "the leaderboard is the first file's (21 rows)")


def test_hostile(exe, tmp):
    run = os.path.join(tmp, "hostile.h5")
    subprocess.run([TEST_REPORT, "--write-hostile", run], check=True,
                   timeout=60)
    page = os.path.join(tmp, "hostile.html")
    report(run, page)
    rc, out, err = chromium(exe, page, "--dump-dom")
    check(rc == 0, "chromium on the hostile page: %s" % err[-300:])
    d = dom(out)
    for tag in ("script", "img", "style", "i", "iframe"):
        n = len(list(d.all(tag)))
        check(n == (1 if tag == "style" else 0),
              "hostile page: %d <%s> elements" % (n, tag))
    handlers = [(n.tag, a) for n in d.all() for a in n.attrs
                if a.startswith("on")]
    check(not handlers, "no event handler attributes: %s" % handlers)
    pres = [p.inner_text() for p in d.all("pre")]
    want = next((p for p in pres if "alert(1)" in p), None)
    check(want is not None and want.startswith(
        "// </pre></details></td></tr></table><script>alert(1)</script>\n"),
        "the hostile source is text inside its <pre>: %r" % (want or "")[:80])
    check(want is not None and '"a\ufffdb"' in want, "NUL shown as U+FFFD")
    rows = list(d.all("tr", "cand"))
    check(len(rows) == 3, "three leaderboard rows survive")


def test_screenshot(exe, run, tmp, name, want_plots):
    page = os.path.join(tmp, name + ".html")
    report(run, page)
    png = os.path.join(tmp, name + ".png")
    rc, _, err = chromium(exe, page, "--screenshot=" + png,
                          "--window-size=1200,2000",
                          "--hide-scrollbars")
    check(rc == 0 and os.path.exists(png), "%s: screenshot: %s"
          % (name, err[-300:]))
    if not os.path.exists(png):
        return
    w, h, rows = decode_png(png)
    check((w, h) == (1200, 2000), "%s: 1200x2000, got %dx%d" % (name, w, h))
    bg = rows[0][0]
    nonbg = sum(1 for r in rows[::4] for p in r[::4] if p != bg)
    frac = nonbg / (len(rows[::4]) * len(rows[0][::4]))
    colours = {p for r in rows[::4] for p in r[::4]}
    check(frac > 0.05 and len(colours) > 20,
          "%s: not blank (%.1f%% non-background, %d colours)"
          % (name, 100 * frac, len(colours)))

    def near(p, rgb):
        return all(abs(a - b) < 12 for a, b in zip(p, rgb))
    blue = sum(1 for r in rows[::2] for p in r[::2]
               if near(p, (0x4e, 0x79, 0xa7)))
    green = sum(1 for r in rows[::2] for p in r[::2]
                if near(p, (0x59, 0xa1, 0x4f)))
    if want_plots:
        check(blue > 2000 and green > 500,
              "%s: plot colours drawn (blue %d, green %d px)"
              % (name, blue, green))
    else:
        check(blue < 50, "%s: no plot drawn (blue %d px)" % (name, blue))
    if name == "full":
        # what the person reviewing the change looks at
        keep = os.environ.get("KL_REPORT_SCREENSHOT")
        if keep:
            shutil.copy(png, keep)


def test_empty_files(exe, tmp):
    for n, words in ((0, ["holds no candidates", "holds no policy steps"]),
                     (5, ["holds no policy steps"])):
        run = os.path.join(tmp, "small%d.h5" % n)
        subprocess.run([FIXTURE, run, str(n)], check=True, timeout=60)
        page = os.path.join(tmp, "small%d.html" % n)
        text = report(run, page)
        for w in words:
            check(w in text, "%d candidates: page says %r" % (n, w))
        if exe:
            rc, out, _ = chromium(exe, page, "--dump-dom")
            d = dom(out)
            charts = [s.attrs.get("data-plot") for s in d.all("svg", "chart")]
            want = [] if n == 0 else ["best", "hist", "components", "stacked"]
            check(sorted(charts) == sorted(want),
                  "%d candidates: plots %s" % (n, charts))
            check(len(list(d.all("tr", "cand"))) == (0 if n == 0 else 4),
                  "%d candidates: leaderboard rows" % n)


def main():
    with tempfile.TemporaryDirectory() as tmp:
        run = os.path.join(tmp, "RUN.h5")
        subprocess.run([FIXTURE, run], check=True, timeout=120)
        test_cli(run, tmp)
        test_bad_files(run, tmp)
        exe = find_chromium()
        test_empty_files(exe, tmp)
        if exe:
            test_dom(exe, run, tmp)
            test_hostile(exe, tmp)
            test_compare(exe, run, tmp)
            test_screenshot(exe, run, tmp, "full", True)
            empty = os.path.join(tmp, "none.h5")
            subprocess.run([FIXTURE, empty, "0"], check=True, timeout=60)
            test_screenshot(exe, empty, tmp, "empty", False)
    print("%d passed, %d failed" % (kltest.passed, kltest.failed))
    if kltest.failed:
        sys.exit(1)
    if not exe:
        print("SKIP: chromium is not installed, so the page was not rendered "
              "(apt-get install chromium, or scripts/deps.sh); the checks "
              "above ran without a browser")
        sys.exit(77)


main()
