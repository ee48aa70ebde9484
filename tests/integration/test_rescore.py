#!/usr/bin/env python3
"""tests/integration/test_rescore.py — `kernlab rescore RUN.h5 --reward F.lua`
end to end, as a user runs it.

usage: test_rescore.py KERNLAB RESULTS_FIXTURE RESCORE_FIXTURE SOURCE_DIR

RESCORE_FIXTURE (tests/unit/test_rescore_fixture.c) writes files whose stored
rewards were produced by a real formula, scored per step+group as a campaign
does; rescoring with that same formula must reproduce them exactly. The
plain RESULTS_FIXTURE (tests/results_fixture.c) stores rewards 3*id - 1 that
no formula produced; it serves the "ranks differ" checks. Every number rescore
reports is recomputed here from its --json rows (Spearman with average ranks
for ties; TRL's group advantages). Standard library only. Prints "N passed, N
failed" and exits non-zero on any failure.
"""
import hashlib
import json
import math
import os
import subprocess
import sys
import tempfile

KERNLAB, RESULTS_FIXTURE, RESCORE_FIXTURE, SRC = sys.argv[1:5]
FORMULAS = {n: os.path.join(SRC, "lua", "reward", n + ".lua")
            for n in ("default", "unsloth", "distance")}
from kltest import check, done  # noqa: E402




def kernlab(*args):
    p = subprocess.run([KERNLAB, *args], capture_output=True, text=True,
                       timeout=120)
    return p.returncode, p.stdout, p.stderr


def rescore_json(run, script, *extra):
    rc, out, err = kernlab("rescore", run, "--reward", script, "--json", *extra)
    check(rc == 0, "rescore %s with %s exits 0, got %d: %s"
          % (os.path.basename(run), os.path.basename(script), rc, err))
    try:
        return json.loads(out)
    except ValueError:
        check(False, "rescore --json prints one JSON object: %r" % out[:200])
        return None


# ---- reference computations ---------------------------------------------

def average_ranks(v):
    order = sorted(range(len(v)), key=lambda i: v[i])
    rank = [0.0] * len(v)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and v[order[j + 1]] == v[order[i]]:
            j += 1
        for k in range(i, j + 1):
            rank[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return rank


def spearman(x, y):
    if len(x) < 2:
        return None
    rx, ry = average_ranks(x), average_ranks(y)
    mx, my = sum(rx) / len(rx), sum(ry) / len(ry)
    sxy = sum((a - mx) * (b - my) for a, b in zip(rx, ry))
    sxx = sum((a - mx) ** 2 for a in rx)
    syy = sum((b - my) ** 2 for b in ry)
    if sxx <= 0 or syy <= 0:
        return None
    return sxy / math.sqrt(sxx * syy)


def advantages(values):
    """TRL: nanmean, nanstd with n-1, (r - mean) / (std + 1e-4), NaN -> 0."""
    vals = [v for v in values if v is not None]
    n = len(vals)
    mean = sum(vals) / n if n else float("nan")
    std = (math.sqrt(sum((v - mean) ** 2 for v in vals) / (n - 1))
           if n > 1 else float("nan"))
    out = []
    for v in values:
        a = (v - mean) / (std + 1e-4) if v is not None else float("nan")
        out.append(0.0 if math.isnan(a) else a)
    return out


def check_consistent(doc, what):
    """Everything rescore reports follows from its per-candidate rows."""
    rows = doc["rows"]
    check([r["id"] for r in rows] == list(range(doc["candidates"])),
          "%s: one row per candidate in id order" % what)
    scored = [r for r in rows if r["old"] is not None]
    check(doc["scored_before"] == len(scored), "%s: scored_before" % what)
    rho = doc["spearman"]["rho"]
    want = spearman([r["old"] for r in scored], [r["new"] for r in scored])
    check(doc["spearman"]["n"] == len(scored), "%s: spearman n" % what)
    check(doc["spearman"]["ties"] == "average", "%s: ties stated" % what)
    check((rho is None and want is None) or
          (rho is not None and want is not None and abs(rho - want) < 1e-9),
          "%s: rho %r, recomputed %r" % (what, rho, want))
    check(rho is None or -1 <= rho <= 1, "%s: rho in [-1, 1]" % what)
    # top lists: sorted, ties in id order
    k = len(doc["top_after"])
    want_after = sorted(rows, key=lambda r: (-r["new"], r["id"]))[:k]
    check([t["id"] for t in doc["top_after"]] == [r["id"] for r in want_after],
          "%s: top after is the highest new totals" % what)
    want_before = sorted(scored, key=lambda r: (-r["old"], r["id"]))
    want_before = want_before[:len(doc["top_before"])]
    check([t["id"] for t in doc["top_before"]] ==
          [r["id"] for r in want_before],
          "%s: top before is the highest old totals" % what)
    # group advantages
    groups = {}
    for r in rows:
        if r["group"] >= 0:
            groups.setdefault((r["step"], r["group"]), []).append(r)
    if not groups:
        check(doc["groups"] is None, "%s: no groups -> null" % what)
        return
    check(doc["groups"] is not None and doc["groups"]["groups"] == len(groups),
          "%s: %d groups" % (what, len(groups)))
    changes, flips = [], 0
    for members in groups.values():
        old = advantages([m["old"] for m in members])
        new = advantages([m["new"] for m in members])
        for m, a, b in zip(members, old, new):
            check(abs(m["old_adv"] - a) < 1e-9 and abs(m["new_adv"] - b) < 1e-9,
                  "%s: advantages of %d" % (what, m["id"]))
            if m["old"] is None:
                continue
            changes.append(abs(b - a))
            flips += (a > 0 and b < 0) or (a < 0 and b > 0)
    g = doc["groups"] or {}
    check(g.get("candidates") == len(changes), "%s: group members" % what)
    check(abs(g.get("mean_abs_change", -1) - sum(changes) / len(changes))
          < 1e-9, "%s: mean |advantage change|" % what)
    check(g.get("sign_changes") == flips, "%s: sign changes" % what)


def file_state(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest(), os.stat(path).st_mtime_ns


# ---- tests --------------------------------------------------------------

def test_same_formula(tmp):
    """Rescoring with the formula that produced the rewards changes nothing."""
    for name, script in FORMULAS.items():
        run = os.path.join(tmp, "same_%s.h5" % name)
        subprocess.run([RESCORE_FIXTURE, run, script], check=True, timeout=120)
        before = file_state(run)
        doc = rescore_json(run, script)
        if not doc:
            continue
        what = "same formula (%s)" % name
        check(doc["spearman"]["rho"] == 1.0, "%s: rho is 1, got %r"
              % (what, doc["spearman"]["rho"]))
        check(doc["changed"] == 0, "%s: no total changes" % what)
        check([t["id"] for t in doc["top_before"]] ==
              [t["id"] for t in doc["top_after"]], "%s: same top 10" % what)
        check(len(doc["top_after"]) == 10, "%s: top 10 by default" % what)
        check(all(t["old"] == t["new"] for t in doc["top_after"]),
              "%s: old == new in the top 10" % what)
        g = doc["groups"] or {}
        check(g.get("groups") == 8 and g.get("mean_abs_change") == 0 and
              g.get("sign_changes") == 0, "%s: advantages unmoved: %r"
              % (what, g))
        check_consistent(doc, what)
        check(file_state(run) == before, "%s: the file is not modified" % what)


def test_other_formulas(tmp):
    """A different formula: properties, determinism, agreement with the
    reference computations, and the text report."""
    run = os.path.join(tmp, "by_default.h5")
    subprocess.run([RESCORE_FIXTURE, run, FORMULAS["default"]], check=True,
                   timeout=120)
    before = file_state(run)
    for name in ("unsloth", "distance"):
        a = kernlab("rescore", run, "--reward", FORMULAS[name], "--json")
        b = kernlab("rescore", run, "--reward", FORMULAS[name], "--json")
        check(a == b, "default -> %s: deterministic" % name)
        doc = rescore_json(run, FORMULAS[name])
        if doc:
            check(doc["changed"] > 0, "default -> %s: totals change" % name)
            check_consistent(doc, "default -> " + name)
    rc, out, err = kernlab("rescore", run, "--reward", FORMULAS["unsloth"])
    check(rc == 0, "text report exits 0: %s" % err)
    for want in ["30 candidates (30 scored before)",
                 "ties get their average rank", "top 10 before (by old total)",
                 "top 10 after (by new total)", "sample-0.cu",
                 "8 group(s), 30 candidates with an old total",
                 "the file is unchanged"]:
        check(want in out, "text report mentions %r" % want)
    rc, out, _ = kernlab("rescore", run, "--reward", FORMULAS["unsloth"],
                         "-n", "3", "--json")
    doc = json.loads(out) if rc == 0 else {}
    check(len(doc.get("top_before", [])) == 3 and
          len(doc.get("top_after", [])) == 3, "-n 3 shows 3 before and after")
    check(file_state(run) == before, "rescoring never modifies the file")


def test_ranks_differ(tmp):
    """The plain fixture's rewards (3*id - 1) grow with id, i.e. with time;
    default.lua pays for speed, so the ranking mostly reverses."""
    run = os.path.join(tmp, "plain.h5")
    subprocess.run([RESULTS_FIXTURE, run], check=True, timeout=120)
    doc = rescore_json(run, FORMULAS["default"])
    if doc:
        rho = doc["spearman"]["rho"]
        check(rho is not None and rho < 0, "rho < 0 on the plain fixture: %r"
              % rho)
        check(doc["top_before"][0]["id"] == 29 and
              doc["top_after"][0]["id"] == 0,
              "best before is id 29, after id 0")
        check_consistent(doc, "plain fixture")


def test_groups_and_unscored(tmp):
    run = os.path.join(tmp, "ungrouped.h5")
    subprocess.run([RESCORE_FIXTURE, run, FORMULAS["default"], "--ungrouped"],
                   check=True, timeout=120)
    rc, out, err = kernlab("rescore", run, "--reward", FORMULAS["unsloth"])
    check(rc == 0 and "no groups" in out, "ungrouped file: says no groups: %s"
          % (out[-300:] + err))
    doc = rescore_json(run, FORMULAS["default"])
    if doc:
        check(doc["groups"] is None, "ungrouped: groups null")
        check(doc["spearman"]["rho"] == 1.0 and doc["changed"] == 0,
              "ungrouped, same formula: rho 1")
        check_consistent(doc, "ungrouped")
    run = os.path.join(tmp, "unscored.h5")
    subprocess.run([RESCORE_FIXTURE, run, FORMULAS["default"], "--unscored",
                    "5"], check=True, timeout=120)
    doc = rescore_json(run, FORMULAS["distance"])
    if doc:
        check(doc["scored_before"] == 24 and doc["spearman"]["n"] == 24,
              "unscored candidates left out of the correlation")
        check(all(t["old"] is not None for t in doc["top_before"]),
              "top before lists scored candidates only")
        check(doc["groups"]["candidates"] == 24,
              "advantage changes over scored candidates only")
        check_consistent(doc, "partly unscored")


BROKEN = {
    # name: (script text, exit code, what stderr must say)
    "syntax.lua": ("local M = {}\nfunction M.score(c, ctx)\n  return {x = }\n"
                   "end\nreturn M\n", 2, "syntax.lua:3:"),
    "runtime.lua": ("local M = {}\nfunction M.score(c, ctx)\n"
                    "  local t = nil\n  return {x = t.y}\nend\nreturn M\n",
                    2, "runtime.lua:4:"),
    "nan.lua": ("return { score = function(c, ctx) return {x = 0/0} end }\n",
                2, "nan.lua"),
    "loop.lua": ("return { score = function(c, ctx)\n"
                 "  while true do pcall(function() end) end end }\n",
                 2, "loop.lua"),
    "no_score.lua": ("return {}\n", 2, "no_score.lua"),
    # a component of the wrong type is named at its own line, not at the
    # line score() begins (Lua keeps no line for a table's fields: the
    # script's text is read for the assignment); a string shows its value,
    # a function the line Lua gives for it
    "string_component.lua": ("local function speed(c)\n  return 'fast'\nend\n\n"
                             "return {\n  score = function(c, ctx)\n    return {\n"
                             "      speed = speed(c),\n    }\n  end\n}\n",
                             2, "string_component.lua:8: score() component 'speed' "
                             "is a string (\"fast\")"),
    "table_component.lua": ("local M = {}\nlocal function parts(c)\n  local t = {}\n"
                            "  t.accuracy = {1}\n  return t\nend\n"
                            "function M.score(c, ctx)\n  return parts(c)\nend\nreturn M\n",
                            2, "table_component.lua:4: score() component 'accuracy' "
                            "is a table"),
    "function_component.lua": ("local M = {}\n\nlocal function speed(c) return 1 end\n\n"
                               "function M.score(c, ctx)\n  local out = {build = 0}\n"
                               "  out.speed = speed\n  return out\nend\nreturn M\n",
                               2, "function_component.lua:7: score() component 'speed' "
                               "is a function (defined at line 3"),
    # no line of the text assigns it by name: score()'s line, said to be that
    "computed_name.lua": ("return { score = function(c)\n"
                          "  local t, k = {}, 'spe' .. 'ed'\n  t[k] = 'x'\n  return t end }\n",
                          2, "computed_name.lua:1: score() (defined here) returned "
                          "component 'speed' as a string"),
}


def test_bad_input(tmp):
    run = os.path.join(tmp, "ok.h5")
    subprocess.run([RESULTS_FIXTURE, run], check=True, timeout=120)
    for name, (text, code, want) in BROKEN.items():
        path = os.path.join(tmp, name)
        with open(path, "w") as f:
            f.write(text)
        rc, out, err = kernlab("rescore", run, "--reward", path)
        lines = err.strip().splitlines()
        check(rc == code and want in err and len(lines) == 1 and not out,
              "%s: exit %d and one line naming %r, got %d: %r"
              % (name, code, want, rc, err))
    missing = os.path.join(tmp, "missing.lua")
    rc, _, err = kernlab("rescore", run, "--reward", missing)
    check(rc == 2 and "missing.lua" in err, "missing script: 2: %r" % err)
    text = os.path.join(tmp, "notes.h5")
    with open(text, "w") as f:
        f.write("not hdf5\n")
    rc, _, err = kernlab("rescore", text, "--reward", FORMULAS["default"])
    check(rc == 2 and "notes.h5" in err and len(err.strip().splitlines()) == 1,
          "non-HDF5 file: one line naming it, exit 2: %r" % err)
    rc, _, err = kernlab("rescore", os.path.join(tmp, "none.h5"), "--reward",
                         FORMULAS["default"])
    check(rc == 2 and "none.h5" in err, "missing file: 2: %r" % err)
    for bad in ([run], ["--reward", FORMULAS["default"]],
                [run, "--reward"], [run, "--reward", FORMULAS["default"],
                                    "-n", "0"],
                [run, "--reward", FORMULAS["default"], "--bogus"],
                [run, "--reward", FORMULAS["default"], "--write"]):
        rc, _, err = kernlab("rescore", *bad)
        check(rc == 2 and "usage:" in err, "rescore %s: usage error 2" % bad)


ERRORS_FORMULA = '''
local M = {}
-- Pays for how far from right a wrong kernel is, read from its error line
-- (rel_err N): rescoring it needs the stored line, not just the status.
function M.score(c, ctx)
  local r = { correct = c.correct and 1 or 0, near = 0 }
  local e = c.errors and tonumber(c.errors:match("rel_err ([%d%.e%+%-]+)"))
  if e then r.near = -math.min(e, 10) end
  return r
end
return M
'''


def test_error_line(tmp):
    """A formula that reads c.errors rescores exactly what it scored live:
    the results file keeps each candidate's error line."""
    script = os.path.join(tmp, "errors.lua")
    with open(script, "w") as f:
        f.write(ERRORS_FORMULA)
    run = os.path.join(tmp, "errors.h5")
    kernels = [os.path.join(SRC, "tests", "kernels", "broken", k) for k in
               ("wrong_index.cu", "edge_off_by_one.cu", "compile_error.cu")]
    kernels.append(os.path.join(SRC, "kernels", "seeds", "01_naive.cu"))
    rc, _, err = kernlab("eval", *kernels, "--shape", "64x64x64", "--reward",
                         script, "--out", run)
    check(rc == 0, "eval --reward --out exits 0: %s" % err[-300:])
    doc = rescore_json(run, script)
    if doc:
        check(doc["changed"] == 0, "errors formula: rescoring changes nothing")
        near = [t["old"] for t in doc["top_after"] if t["old"] < 1]
        check(any(v < 0 for v in near),
              "errors formula: the error line was read (a negative total)")
    rc, out, _ = kernlab("export", run, "--format", "jsonl")
    check(rc == 0 and '"error":"wrong at' in out,
          "export carries the error line: %s" % out[:200])


def test_huge_totals(tmp):
    """A formula may return totals up to 1e150 (RW_MAX_TOTAL): the text
    table shows them with an exponent, not as 151-digit numbers, and a
    label's escape bytes reach the terminal as '?'. Totals like 2.5e-5 too,
    not as +0.0000."""
    run = os.path.join(tmp, "huge.h5")
    subprocess.run([RESULTS_FIXTURE, run], check=True, timeout=120)
    path = os.path.join(tmp, "huge.lua")
    with open(path, "w") as f:
        f.write("return { score = function(c, ctx) return {x = 1e150} end }\n")
    rc, out, err = kernlab("rescore", run, "--reward", path, "-n", "2")
    rows = [l for l in out.splitlines() if l.startswith("     1 ")
            or l.startswith("     2 ")]
    check(rc == 0 and len(rows) == 4, "1e150 totals: 4 table rows: %d %r"
          % (rc, err))
    check(all(len(l) < 120 and "+1e+150" in l for l in rows),
          "1e150 is shown as +1e+150: %r" % rows)
    # and a formula at a scale of 1e-5: four significant digits, not
    # +0.0000 on every row
    with open(path, "w") as f:
        f.write("return { score = function(c, ctx) return {x = 2.5e-5} end }\n")
    rc, out, err = kernlab("rescore", run, "--reward", path, "-n", "2")
    rows = [l for l in out.splitlines() if l.startswith("     1 ")
            or l.startswith("     2 ")]
    after = rows[2:]
    check(rc == 0 and len(after) == 2 and all("+2.5e-05" in l for l in after),
          "2.5e-5 totals are shown as +2.5e-05: %r" % rows)


def test_versions(tmp):
    """A file whose candidates were scored by two versions of a formula
    (here two evals appending with different scripts; in a campaign, a hot
    reload): rescore says the old totals come from both."""
    run = os.path.join(tmp, "two.h5")
    seed = os.path.join(SRC, "kernels", "seeds", "01_naive.cu")
    for name in ("default", "unsloth"):
        p = subprocess.run([KERNLAB, "eval", seed, "--shape", "32x32x32", "--reward",
                            FORMULAS[name], "--out", run], capture_output=True, text=True,
                           timeout=600)
        check(p.returncode == 0, "eval with %s: %s" % (name, p.stderr[-300:]))
    rc, out, err = kernlab("rescore", run, "--reward", FORMULAS["distance"])
    check(rc == 0 and "the stored totals come from 2 versions" in out,
          "two versions said: %d %s %s" % (rc, out[:400], err[-200:]))
    doc = rescore_json(run, FORMULAS["distance"])
    check(doc and doc.get("old_script_versions") == 2, "json: old_script_versions 2")


def main():
    with tempfile.TemporaryDirectory() as tmp:
        for test in (test_same_formula, test_other_formulas, test_ranks_differ,
                     test_groups_and_unscored, test_bad_input, test_error_line,
                     test_huge_totals, test_versions):
            test(tmp)
    done()


if __name__ == "__main__":
    main()
