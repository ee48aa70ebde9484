#!/usr/bin/env python3
"""tests/integration/test_reward_lab.py — the lab's configuration scripts
(campaign files, search spaces) against input the sandbox's C side read
wrong: bytes after a NUL, names that are no file names, lists with holes,
numbers given as strings. Each must be refused with exit 2 and one line
that names the file and what was expected; none may be read as something
else.

usage: test_reward_lab.py KERNLAB SOURCE_DIR

  - campaign files: `return {}\\0garbage` and `\\0return {...}` refused
    naming the NUL's offset (the text used to be cut there), backend =
    "gpu\\0x" is no "gpu", a key "name\\0x" is no "name";
  - search spaces (`kernlab search random --list`): kl.seed with a NUL in
    the name, variant names with a newline, an ESC or "../", a list with
    holes (naming the first missing index), holdout_fraction = "0.5";
  - and what is right still lists.
"""
import os
import subprocess
import sys
import tempfile

KERNLAB, SRC = sys.argv[1], sys.argv[2]
from kltest import check, done  # noqa: E402

ENV = dict(os.environ, KL_SOURCE_DIR=SRC)


def kernlab(*args, cwd=None):
    return subprocess.run([KERNLAB, *args], capture_output=True, timeout=120,
                          cwd=cwd, env=ENV)


def write(path, data):
    with open(path, "wb") as f:
        f.write(data)
    return path


def one_clean_line(err):
    """stderr is one line with no byte a terminal would act on."""
    return err.count(b"\n") == 1 and not any(b < 0x20 and b not in (9, 10) or b == 0x7f
                                             for b in err)


with tempfile.TemporaryDirectory() as d:
    reward = os.path.join(SRC, "lua", "reward", "default.lua")

    # ---- campaign files ----
    for name, data, needle in (
            ("nul_after.lua", b"return {}\0this is not lua at all }}}{{{", b"NUL byte at offset 9"),
            ("nul_first.lua", b"\0return {steps = -5}", b"NUL byte at offset 0"),
            ("backend_nul.lua", b'return {backend = "gpu\\0x"}', b"backend: expected one of"),
            ("key_nul.lua", b'return {["name\\0x"] = "a"}', b"unknown field")):
        p = kernlab("run", write(os.path.join(d, name), data), cwd=d)
        check(p.returncode == 2 and needle in p.stderr and name.encode() in p.stderr
              and one_clean_line(p.stderr),
              "campaign %s: exit 2 saying %r: %d %r" % (name, needle, p.returncode, p.stderr))

    # ---- search spaces ----
    camp = write(os.path.join(d, "camp.lua"), ("return {reward = %r}\n" % reward).encode())

    def space(name, body):
        return write(os.path.join(d, name), body.encode())

    p = kernlab("search", "random", camp, "--space",
                space("ok.lua", 'return {generate = function(kl) return {'
                      '{name = "a_1+b.c-d", source = kl.seed("01_naive.cu")}} end}'),
                "--list", cwd=d)
    check(p.returncode == 0 and p.stdout.startswith(b"a_1+b.c-d\n"),
          "a good space lists: %d %r %r" % (p.returncode, p.stdout, p.stderr))

    for name, body, needle in (
            ("seed_nul.lua",
             'return {generate = function(kl) return {{name = "x", '
             'source = kl.seed("01_naive.cu\\0/../../x")}} end}',
             b"not a seed file name"),
            ("name_ctrl.lua",
             'return {generate = function(kl) return {{name = "a\\nb\\27[31mRED", '
             'source = "x"}} end}',
             b"variant 1: name: expected letters, digits, '_', '-', '+' and '.', not "
             b"starting with '.', under 128 bytes (a file name); got 'a?b?[31mRED'"),
            ("name_path.lua",
             'return {generate = function(kl) return {{name = "ok", source = "x"}, '
             '{name = "../../../tmp/evil", source = "y"}} end}',
             b"variant 2: name: expected letters"),
            ("name_slash.lua",
             'return {generate = function(kl) return {{name = "a/b", source = "x"}} end}',
             b"got 'a/b'"),
            ("config_ctrl.lua",
             'return {generate = function(kl) return {{name = "a", config = "c\\27", '
             'source = "x"}} end}',
             b"variant 1: config:"),
            ("holes.lua",
             'return {generate = function(kl) local t = {{name = "a", source = "x"}}\n'
             '  t[3] = {name = "b", source = "y"} t[1000000] = {name = "c", source = "z"}\n'
             '  return t end}',
             b"variant 2 is missing (the list goes on to 1000000)"),
            ("holes_far.lua",
             'return {generate = function(kl) return {{name = "a", source = "x"}, '
             '[70000] = {name = "b", source = "y"}} end}',
             b"variant 2 is missing"),
            ("holdout_holes.lua",
             'return {holdout = {"a", nil, "b"}, generate = function(kl) '
             'return {{name = "a", source = "x"}, {name = "b", source = "x"}} end}',
             b"holdout name 2 is missing"),
            ("fraction_string.lua",
             'return {holdout_fraction = "0.5", generate = function(kl) '
             'return {{name = "a", source = "x"}} end}',
             b"holdout_fraction: expected a number")):
        p = kernlab("search", "random", camp, "--space", space(name, body), "--list", cwd=d)
        check(p.returncode == 2 and needle in p.stderr and name.encode() in p.stderr
              and one_clean_line(p.stderr) and not p.stdout,
              "space %s: exit 2 saying %r, nothing listed: %d %r %r"
              % (name, needle, p.returncode, p.stdout, p.stderr))

done()
