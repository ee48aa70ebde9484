#!/usr/bin/python3
"""tests/python/test_report_hostile.py — the report and `show` on results
files edited with h5py into what an adversarial review of the report
found (the report review).

usage: test_report_hostile.py KERNLAB RESULTS_FIXTURE
Runs with Debian's /usr/bin/python3 and python3-h5py (ctest label `python`);
exits 77 (skipped) when h5py is missing.

1. The best-time tile is the best correct kernel without a flag, as the
   comparison table and a campaign count it (it headlined a kernel that
   leaked through printf).
2. Tiles of 1e100 read as 1e+100, not as a number cut at 64 bytes.
3. The status table counts each status once, most common first, ties by
   name (it was a search per candidate: 45 s for 100,000 distinct
   statuses; the order is what a test can hold).
4. Reward-component means of values near the largest double are finite
   (a plain sum made width="inf").
5. Text-direction controls (U+202E and kin) in a label show as marks on
   the page and as '?' on a terminal, never as themselves.
6. `show --stats` leaves NaN samples out of its quantiles (min and max
   came out wrong).
7. A source already shown in the leaderboard is named, not repeated (fifty
   copies of a 256 KiB source of quotes made a 77 MB page). The fixture's
   candidates 2 and 3 share one source, as do 6 and 7.
8. A report on files of different tasks says so (stderr and page) and
   compares no times across them (the walkthrough review).
"""
import math
import os
import re
import subprocess
import sys
import tempfile

try:
    import h5py
    import numpy as np
except ImportError as e:
    print("SKIP: h5py/numpy not importable with %s: %s" % (sys.executable, e))
    sys.exit(77)

KERNLAB, FIXTURE = sys.argv[1], sys.argv[2]
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                                "integration"))
from kltest import check, done  # noqa: E402
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import h5fixture  # noqa: E402


def fixture(tmp, name, edit, more=None):
    """The 8-candidate fixture edited (h5fixture.edited)."""
    return h5fixture.edited(FIXTURE, tmp, name, edit, more=more)


def run(*args):
    p = subprocess.run([KERNLAB, *args], capture_output=True, timeout=300)
    return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")


def report(tmp, path):
    out = path[:-3] + ".html"
    rc, _, err = run("report", path, "-o", out)
    page = open(out, encoding="utf-8").read() if rc == 0 else ""
    check(rc == 0, "report %s: %d %s" % (os.path.basename(path), rc, err[-300:]))
    return page


def tile(page, what):
    m = re.search(r'<div class="tile"><b>([^<]*)</b><span>' + re.escape(what), page)
    return m.group(1) if m else None


def test_tiles(tmp):
    def flagged_fastest(c):
        c["correct"] = True
        c["time_us"] = [1.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 11.0]
        c["flags"] = [1, 0, 0, 0, 0, 0, 0, 0]
    page = report(tmp, fixture(tmp, "flagged", flagged_fastest))
    check(tile(page, "best time") == "5.000",
          "the best-time tile leaves the flagged kernel out: %r" % tile(page, "best time"))

    def huge(c):
        c["correct"] = True
        c["flags"] = 0
        c["time_us"] = 1e100
        c["reward"] = 2e200
    page = report(tmp, fixture(tmp, "huge", huge))
    check(tile(page, "best time") == "1e+100" and tile(page, "best reward") == "2e+200",
          "huge tiles in exponent form: %r %r" % (tile(page, "best time"),
                                                  tile(page, "best reward")))


def test_status_table(tmp):
    def statuses(c):
        c["status"] = [b"a", b"d", b"b", b"a", b"c", b"d", b"a", b"b"]
    page = report(tmp, fixture(tmp, "statuses", statuses))
    m = re.search(r'<table class="status">(.*?)</table>', page, re.S)
    rows = re.findall(r"<tr><td>([^<]*)</td><td class=\"num\">(\d+)</td></tr>",
                      m.group(1) if m else "")
    check(rows == [("a", "3"), ("b", "2"), ("d", "2"), ("c", "1")],
          "statuses counted once each, most common first, ties by name: %r" % rows)


def test_component_means(tmp):
    def comps(f):
        v = f["reward_components"][...]
        v[:, 0] = 1e308
        v[:, 1] = [1e308, -1e308] * (len(v) // 2)
        f["reward_components"][...] = v
    page = report(tmp, fixture(tmp, "comps", lambda c: None, comps))
    svg = re.search(r'data-plot="components".*?</svg>', page, re.S)
    svg = svg.group(0) if svg else ""
    bad = re.findall(r'="[^"]*(?:inf|nan)[^"]*"', svg)
    means = re.findall(r'data-mean="([^"]*)"', svg)
    check(svg and not bad and len(means) == 2 and float(means[0]) == 1e308 and
          float(means[1]) == 0,
          "component means near the largest double: finite, no inf in the SVG: %r %r"
          % (means, bad[:3]))


def test_direction_controls(tmp):
    label = "ok\u202e/* x */\u2066y\u2069".encode()

    def labels(c):
        c["label"] = label
        c["correct"] = True
        c["flags"] = 0
    path = fixture(tmp, "bidi", labels)
    page = report(tmp, path)
    controls = [ch for ch in page if ch in "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
                "\u200e\u200f\u061c"]
    check(not controls and "&#x27E8;U+202E&#x27E9;" in page and "&#x27E8;U+2066&#x27E9;" in page,
          "direction controls shown as marks on the page: %r" % controls[:4])
    for cmd in (["show", path, "0"], ["top", path]):
        rc, out, err = run(*cmd)
        check(rc == 0 and "\u202e" not in out and "\u2066" not in out and "ok?" in out,
              "%s: direction controls as '?' on a terminal: %d %r" % (cmd[0], rc, out[:300]))


def test_stats_nan(tmp):
    def samples(f):
        c = f["candidates"][...]
        off, n = int(c[5]["timing_off"]), int(c[5]["timing_count"])
        t = f["timings"][...]
        t[off:off + n] = [9.0, math.nan, 1.0, 8.0, math.nan][:n]
        f["timings"][...] = t
    path = fixture(tmp, "stats", lambda c: None, samples)
    rc, out, err = run("show", path, "5", "--stats")
    m = re.search(r"min ([\d.]+) .* max ([\d.]+)", out)
    check(rc == 0 and m and (m.group(1), m.group(2)) == ("1.000", "9.000") and
          "2 of 5 samples are not finite" in out,
          "show --stats: quantiles of the finite samples: %d %r" % (rc, out))


def test_repeated_sources(tmp):
    page = report(tmp, fixture(tmp, "repeats", lambda c: None))
    check(page.count("// candidate 2\n") == 1 and page.count("// candidate 6\n") == 1 and
          "(the source of candidate 2, above)" in page and
          "(the source of candidate 6, above)" in page and
          page.count("// candidate 0\n") == 1,
          "a repeated source is named, once shown: %d %d" %
          (page.count("// candidate 2\n"), page.count("(the source of candidate")))


def test_other_tasks(tmp):
    """A report on files of different tasks (the walkthrough review): a
    256^3 campaign compared with a 64^3 search read "speed vs the best
    file: 5%" without a word. The other task is named on stderr and on the
    page, and left out of the plot and of the speed column; the files of
    the first file's task are still compared."""
    def timed(task, times):
        def fn(c):
            c["task"] = task
            c["correct"] = True
            c["flags"] = 0
            c["time_us"] = times
        return fn
    camp = fixture(tmp, "camp256", timed(b"fp32_256x256x256", [2192.0 + i for i in range(8)]))
    # an older file's name for the same task: compared
    rnd = fixture(tmp, "rnd256", timed(b"fp32_256", [2000.0 + i for i in range(8)]))
    small = fixture(tmp, "search64", timed(b"fp32_64x64x64", [130.0 + i for i in range(8)]))
    page_path = os.path.join(tmp, "cmp.html")
    rc, _, err = run("report", camp, rnd, small, "-o", page_path)
    page = open(page_path, encoding="utf-8").read() if rc == 0 else ""
    check(rc == 0 and "not comparable" in err and "fp32_256x256x256" in err and
          "fp32_64x64x64" in err and "search64.h5" in err and "rnd256.h5" not in err,
          "report names the file of another task on stderr, only it: %d %r" % (rc, err))
    notes = re.findall(r'<p class="note not-comparable">([^<]*)</p>', page)
    check(len(notes) == 1 and "fp32_64x64x64" in notes[0] and "search64.h5" in notes[0],
          "the page names it: %s" % notes)
    speeds = re.findall(r'<tr class="file[^"]*" data-series="compare-(\d)">'
                        r'(?:<td[^>]*>[^<]*</td>){5}<td class="num">([^<]*)</td>', page)
    check(speeds == [("0", "91%"), ("1", "100%"), ("2", "not comparable")],
          "speed vs the best file: of the 256^3 files only (2000/2192), "
          "none for the 64^3 one: %s" % speeds)
    series = re.findall(r'<polyline class="series" data-series="compare-(\d)"', page)
    check(series == ["0", "1"], "the plot draws the 256^3 files only: %s" % series)
    rc, _, err = run("report", camp, rnd, "-o", os.path.join(tmp, "same.html"))
    check(rc == 0 and "not comparable" not in err and "warning" not in err,
          "files of one task: no warning: %r" % err)


def main():
    with tempfile.TemporaryDirectory() as tmp:
        test_tiles(tmp)
        test_status_table(tmp)
        test_component_means(tmp)
        test_direction_controls(tmp)
        test_stats_nan(tmp)
        test_repeated_sources(tmp)
        test_other_tasks(tmp)
    done()


main()
