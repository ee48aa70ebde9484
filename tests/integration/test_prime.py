#!/usr/bin/env python3
"""tests/integration/test_prime.py — `kernlab prime` and `kernlab generate`.

usage: test_prime.py KERNLAB SOURCE_DIR

A tiny priming run on the seed and honest kernels: the loss falls, the
checkpoint and tokenizer are written and load again (generate samples from
them, taking CKPT.tok without --tok), and bad input is a clear exit 2: a
missing corpus folder, a folder without valid kernels, a corrupt checkpoint,
a tokenizer that does not match, no --tok and no CKPT.tok.
--policy-device (prime and generate): without a device, gpu exits 3 with
the reason and auto falls back to the CPU (saying so) and trains or samples
as cpu does. --policy-dtype bf16: exit 2 on the CPU; with auto and no device
the CPU trains in fp32, saying so. Ctrl-C saves the step in flight and
exits 130.
"""
import hashlib
import os
import struct
import re
import shutil
import stat
import subprocess
import sys
import tempfile

KERNLAB, SRC = sys.argv[1], sys.argv[2]
from kltest import check, done, interrupted  # noqa: E402


def run(*args):
    return subprocess.run([KERNLAB, *args], capture_output=True, text=True,
                          errors="replace", timeout=600)


with tempfile.TemporaryDirectory() as d:
    corpus = os.path.join(d, "corpus")
    os.mkdir(corpus)
    for sub in ("kernels/seeds", "tests/kernels/honest"):
        for f in os.listdir(os.path.join(SRC, sub)):
            if f.endswith(".cu"):
                shutil.copy(os.path.join(SRC, sub, f), os.path.join(corpus, f))
    ck = os.path.join(d, "p.ckpt")
    p = run("prime", "--corpus", corpus, "--out", ck, "--size", "tiny", "--steps", "60",
            "--lr", "3e-3")
    check(p.returncode == 0, "prime exits 0: %s" % p.stderr[-500:])
    m = re.search(r"loss ([0-9.]+) -> ([0-9.]+)", p.stdout)
    check(m and float(m.group(2)) < float(m.group(1)) - 0.5,
          "the loss falls: %s" % str(m and m.groups()))
    check(os.path.exists(ck) and os.path.exists(ck + ".tok"), "checkpoint and tokenizer written")
    g = run("generate", "--ckpt", ck, "--tok", ck + ".tok", "--prompt", "// task", "-n", "2",
            "--max-tokens", "20", "--seed", "3")
    check(g.returncode == 0 and "completion 1" in g.stdout, "generate samples: %s" % g.stderr[-300:])
    g2 = run("generate", "--ckpt", ck, "--tok", ck + ".tok", "--prompt", "// task", "-n", "2",
             "--max-tokens", "20", "--seed", "3")
    check(g.stdout == g2.stdout, "the same seed gives the same samples")
    g3 = run("generate", "--ckpt", ck, "--tok", ck + ".tok", "--prompt", "", "--no-bos")
    check(g3.returncode == 2 and "the prompt is empty: with --no-bos" in g3.stderr and
          "generate: generate" not in g3.stderr,
          "an empty prompt without <|bos|>: said once: %d %s" % (g3.returncode, g3.stderr))
    # A prompt longer than the model's context is said once, in the
    # options' terms (it was 'kernlab generate: generate: prompt of 5001
    # tokens ...', the bos counted in without a word)
    g4 = run("generate", "--ckpt", ck, "--tok", ck + ".tok", "--prompt", "\x01" * 5000)
    check(g4.returncode == 2 and "generate: generate" not in g4.stderr and
          "--prompt is 5000 tokens (5001 with <|bos|>); the model's context (max_seq) is 2048: "
          "expected at most 2046, leaving room for a completion" in g4.stderr,
          "a prompt past the context: said once: %d %s" % (g4.returncode, g4.stderr))
    # a checkpoint whose context (max_seq 2, sound otherwise) holds no
    # prompt beside <|bos|>: said as such, not 'expected at most 0'
    short = bytearray(open(ck, "rb").read()[:-32])
    struct.pack_into("<I", short, 36, 2)
    short_ck = os.path.join(d, "short.ckpt")
    with open(short_ck, "wb") as f:
        f.write(bytes(short) + hashlib.sha256(bytes(short)).digest())
    g5 = run("generate", "--ckpt", short_ck, "--tok", ck + ".tok", "--prompt", "x")
    check(g5.returncode == 2 and "the model's context (max_seq) is 2 tokens: no room for a "
          "prompt, <|bos|> and a completion" in g5.stderr,
          "a context too short for any prompt: said: %d %s" % (g5.returncode, g5.stderr))
    # On a terminal the completions hold no control bytes (a policy's bytes
    # are anyone's: an escape sequence reached the terminal raw); into a
    # pipe they are exact. At temperature 50 a barely trained model draws
    # nearly uniformly, byte tokens and their control bytes included.
    hot = ["generate", "--ckpt", ck, "--tok", ck + ".tok", "--prompt", "x", "-n", "2",
           "--max-tokens", "300", "--temperature", "50", "--seed", "5"]
    piped = subprocess.run([KERNLAB, *hot], capture_output=True, timeout=600).stdout
    master, slave = os.openpty()
    proc = subprocess.Popen([KERNLAB, *hot], stdout=slave, stderr=subprocess.DEVNULL)
    os.close(slave)
    shown = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the other end is closed
            break
        if not chunk:
            break
        shown += chunk
    proc.wait(timeout=600)
    os.close(master)
    controls = set(range(32)) - {9, 10, 13}  # the terminal writes \n as \r\n
    check(any(b in controls for b in piped),
          "a piped completion keeps its bytes, control bytes included: %r" % piped[:200])
    check(proc.returncode == 0 and b"completion 1" in shown and
          not any(b in controls or b == 0x7f for b in shown),
          "on a terminal, no control bytes: %d %r" % (proc.returncode, shown[:300]))
    # --tok left out: the tokenizer prime saved beside the checkpoint
    gd = run("generate", "--ckpt", ck, "--prompt", "// task", "-n", "2",
             "--max-tokens", "20", "--seed", "3")
    check(gd.returncode == 0 and gd.stdout == g.stdout,
          "generate without --tok takes CKPT.tok: %d %s" % (gd.returncode, gd.stderr[-300:]))
    # neither --tok nor CKPT.tok: exit 2 naming the path looked at and
    # --tok; a missing checkpoint is named as such, not as its .tok
    lone = os.path.join(d, "lone.ckpt")
    shutil.copy(ck, lone)
    gn = run("generate", "--ckpt", lone, "--prompt", "x")
    check(gn.returncode == 2 and "no --tok given" in gn.stderr and lone + ".tok" in gn.stderr
          and "--tok FILE.tok" in gn.stderr,
          "no --tok and no CKPT.tok: exit 2, both said: %d %s" % (gn.returncode, gn.stderr[-300:]))
    gm = run("generate", "--ckpt", os.path.join(d, "absent.ckpt"), "--prompt", "x")
    check(gm.returncode == 2 and "absent.ckpt: cannot open checkpoint" in gm.stderr
          and ".tok" not in gm.stderr,
          "no --tok and no checkpoint: the checkpoint named: %d %s" % (gm.returncode, gm.stderr[-300:]))
    # generate --policy-device: cpu samples as the default does; auto
    # falls back to the CPU where no device answers and samples the same.
    gc = run("generate", "--ckpt", ck, "--tok", ck + ".tok", "--prompt", "// task", "-n", "2",
             "--max-tokens", "20", "--seed", "3", "--policy-device", "cpu")
    ga = run("generate", "--ckpt", ck, "--tok", ck + ".tok", "--prompt", "// task", "-n", "2",
             "--max-tokens", "20", "--seed", "3", "--policy-device", "auto")
    gg = run("generate", "--ckpt", ck, "--tok", ck + ".tok", "--prompt", "// task", "-n", "2",
             "--max-tokens", "20", "--seed", "3", "--policy-device", "gpu")
    check(gc.returncode == 0 and gc.stdout == g.stdout,
          "generate --policy-device cpu samples as the default: %s" % gc.stderr[-300:])
    if "no device for the policy" in ga.stderr:
        check(ga.returncode == 0 and ga.stdout == g.stdout and "runs on the CPU" in ga.stderr,
              "generate --policy-device auto falls back to the CPU: %s" % ga.stderr[-300:])
        check(gg.returncode == 3 and "no device for the policy" in gg.stderr and not gg.stdout,
              "generate --policy-device gpu without a device: exit 3: %d %s"
              % (gg.returncode, gg.stderr[-300:]))
    else:
        # fp32 sampling on the device gives the CPU's tokens for a fixed seed.
        check(gg.returncode == 0 and gg.stdout == g.stdout,
              "generate --policy-device gpu samples as the CPU: %s" % gg.stderr[-300:])
    gx = run("generate", "--ckpt", ck, "--tok", ck + ".tok", "--prompt", "x",
             "--policy-device", "tpu")
    check(gx.returncode == 2 and "tpu" in gx.stderr and "usage" in gx.stderr,
          "generate --policy-device tpu: exit 2: %s" % gx.stderr)

    # --policy-device: gpu needs a device (exit 3 with the reason where
    # none answers); auto falls back to the CPU, says so, and then trains
    # exactly as the default (cpu) does.
    def losses(out):
        m = re.search(r"loss ([0-9.]+) -> ([0-9.]+)", out)
        return m and m.groups()
    pc = run("prime", "--corpus", corpus, "--out", os.path.join(d, "c.ckpt"), "--size", "tiny",
             "--steps", "3", "--policy-device", "cpu")
    pa = run("prime", "--corpus", corpus, "--out", os.path.join(d, "a.ckpt"), "--size", "tiny",
             "--steps", "3", "--policy-device", "auto")
    pg = run("prime", "--corpus", corpus, "--out", os.path.join(d, "g.ckpt"), "--size", "tiny",
             "--steps", "3", "--policy-device", "gpu")
    check(pc.returncode == 0 and pa.returncode == 0,
          "--policy-device cpu and auto exit 0: %s %s" % (pc.stderr[-300:], pa.stderr[-300:]))
    if "no device for the policy" in pa.stderr:
        check("--policy-device auto" in pa.stderr and "runs on the CPU" in pa.stderr,
              "auto says it falls back to the CPU: %s" % pa.stderr[-300:])
        check(losses(pa.stdout) and losses(pa.stdout) == losses(pc.stdout),
              "auto on the CPU trains as cpu does: %s vs %s" % (losses(pa.stdout), losses(pc.stdout)))
        check(pg.returncode == 3 and "--policy-device gpu" in pg.stderr and
              "no device for the policy" in pg.stderr,
              "gpu without a device: exit 3 with the reason: %d %s" % (pg.returncode, pg.stderr))
        check(not os.path.exists(os.path.join(d, "g.ckpt")), "gpu without a device writes nothing")
    else:
        check(pg.returncode == 0 and "policy on" in pg.stderr,
              "gpu with a device trains: %d %s" % (pg.returncode, pg.stderr[-300:]))
    # --policy-dtype bf16 is a device path: refused with cpu, fp32 on the
    # CPU (said) with auto and no device; an unknown dtype is a usage error.
    pb = run("prime", "--corpus", corpus, "--out", os.path.join(d, "b.ckpt"), "--size", "tiny",
             "--steps", "3", "--policy-dtype", "bf16")
    check(pb.returncode == 2 and "needs the policy on a device" in pb.stderr
          and not os.path.exists(os.path.join(d, "b.ckpt")),
          "--policy-dtype bf16 on the CPU: exit 2: %d %s" % (pb.returncode, pb.stderr[-300:]))
    pab = run("prime", "--corpus", corpus, "--out", os.path.join(d, "ab.ckpt"), "--size", "tiny",
              "--steps", "3", "--policy-device", "auto", "--policy-dtype", "bf16")
    if "no device for the policy" in pab.stderr:
        check(pab.returncode == 0 and "runs in fp32" in pab.stderr
              and losses(pab.stdout) == losses(pc.stdout),
              "--policy-device auto --policy-dtype bf16 without a device trains in fp32: %s"
              % pab.stderr[-300:])
    else:
        check(pab.returncode == 0 and "bf16 GEMM operands" in pab.stderr,
              "--policy-dtype bf16 on a device: %s" % pab.stderr[-300:])
    p = run("prime", "--corpus", corpus, "--out", ck, "--size", "tiny", "--policy-dtype", "fp16")
    check(p.returncode == 2 and "usage" in p.stderr, "--policy-dtype fp16: exit 2: %s" % p.stderr)
    gb = run("generate", "--ckpt", ck, "--tok", ck + ".tok", "--prompt", "x",
             "--policy-dtype", "bf16")
    check(gb.returncode == 2 and "needs the policy on a device" in gb.stderr,
          "generate --policy-dtype bf16 on the CPU: exit 2: %s" % gb.stderr[-300:])
    p = run("prime", "--corpus", corpus, "--out", ck, "--size", "tiny", "--policy-device", "tpu")
    check(p.returncode == 2 and "usage" in p.stderr, "--policy-device tpu: exit 2: %s" % p.stderr)

    # an existing checkpoint is kept unless --force (it may be a campaign's
    # trained policy); the refusal comes before any training
    with open(ck, "rb") as f:
        before = f.read()
    p = run("prime", "--corpus", corpus, "--out", ck, "--size", "tiny", "--steps", "1")
    with open(ck, "rb") as f:
        after = f.read()
    check(p.returncode == 2 and "exists; --force replaces it" in p.stderr and before == after,
          "prime over an existing checkpoint: refused, untouched: %d %s" % (p.returncode, p.stderr))
    fk = os.path.join(d, "forced.ckpt")
    shutil.copyfile(ck, fk)
    p = run("prime", "--corpus", corpus, "--out", fk, "--size", "tiny", "--steps", "1", "--force")
    check(p.returncode == 0 and os.path.getsize(fk) > 0, "prime --force replaces: %d %s"
          % (p.returncode, p.stderr[-300:]))
    p = run("prime", "--corpus", corpus, "--out", ck + ".s", "--size", "huge")
    check(p.returncode == 2 and "--size huge: expected tiny or small" in p.stderr,
          "--size huge: named: %s" % p.stderr)
    # an lr that is 0 as a float (trained nothing without a word) or past 1
    for lr in ("1e-300", "1000", "0"):
        p = run("prime", "--corpus", corpus, "--out", ck + ".s", "--lr", lr)
        check(p.returncode == 2 and "--lr %s: expected a number in [1e-8, 1]" % lr in p.stderr and
              not os.path.exists(ck + ".s"), "--lr %s: refused: %s" % (lr, p.stderr))
    p = run("prime", "--corpus", corpus, "--out", ck + ".s", "--steps")
    check(p.returncode == 2 and "missing value for --steps" in p.stderr,
          "--steps without a value: named: %s" % p.stderr)
    ck_new = ck + ".new"
    p = run("prime", "--corpus", os.path.join(d, "nope"), "--out", ck_new, "--size", "tiny")
    check(p.returncode == 2 and "nope" in p.stderr, "missing corpus: exit 2 naming it: %s" % p.stderr)
    empty = os.path.join(d, "empty")
    os.mkdir(empty)
    with open(os.path.join(empty, "x.cu"), "w") as f:
        f.write("not a kernel\n")
    p = run("prime", "--corpus", empty, "--out", ck_new, "--size", "tiny")
    check(p.returncode == 2 and "no valid kernels" in p.stderr, "no valid kernels: %s" % p.stderr)
    # A corpus file's name is shown without its control bytes: an escape
    # sequence in it reached the terminal raw (the skipped file's message
    # in prime; a refused file's in tokenizer train)
    evil = os.path.join(empty, "evil\x1b]0;PWNED\x07\n.cu")
    open(evil, "w").close()
    p = run("prime", "--corpus", empty, "--out", ck_new, "--size", "tiny")
    check(p.returncode == 2 and "skipping" in p.stderr and "evil?]0;PWNED??.cu" in p.stderr
          and not any(c in p.stderr for c in "\x1b\x07"),
          "prime: a file name's control bytes are not shown: %r" % p.stderr[-300:])
    os.truncate(evil, 65 << 20)  # sparse: over tokenizer train's 64 MiB
    t = run("tokenizer", "train", "--corpus", empty, "--vocab", "300",
            "--out", os.path.join(d, "evil.tok"))
    check(t.returncode == 2 and "too large" in t.stderr and "evil?]0;PWNED??.cu" in t.stderr
          and not any(c in t.stderr for c in "\x1b\x07"),
          "tokenizer train: a file name's control bytes are not shown: %r" % t.stderr[-300:])
    os.unlink(evil)
    bad = os.path.join(d, "bad.ckpt")
    with open(ck, "rb") as f:
        data = bytearray(f.read())
    data[len(data) // 2] ^= 0xFF
    with open(bad, "wb") as f:
        f.write(data)
    g = run("generate", "--ckpt", bad, "--tok", ck + ".tok", "--prompt", "x")
    check(g.returncode == 2 and "bad.ckpt" in g.stderr, "corrupt checkpoint: exit 2 naming it: %s" % g.stderr)
    for opt in (["-n", "nan"], ["--max-tokens", "nan"], ["--seed", "inf"], ["--seed", "1e30"],
                ["--seed", "-1"], ["--seed", "5x"], ["-n", "2.5"]):
        g = run("generate", "--ckpt", ck, "--tok", ck + ".tok", "--prompt", "x", *opt)
        check(g.returncode == 2 and ("finite" in g.stderr or "--seed: expected an integer" in
                                     g.stderr or "whole number" in g.stderr),
              "generate %s: exit 2, said: %d %s" % (opt, g.returncode, g.stderr[-200:]))
    # a value past float's range is named as typed, not as the inf or 0 it
    # would become
    for opt, says in ((["--temperature", "1e300"], "--temperature: 1e300 does not fit a float"),
                      (["--top-p", "1e-50"], "--top-p: 1e-50 does not fit a float")):
        g = run("generate", "--ckpt", ck, "--tok", ck + ".tok", "--prompt", "x", *opt)
        check(g.returncode == 2 and says in g.stderr,
              "generate %s: exit 2 naming the value: %s" % (opt, g.stderr[-200:]))
    # a seed above 2^53 is kept whole (it was read as a double): two seeds
    # one apart give their own draws, and each replays itself
    outs = [run("generate", "--ckpt", ck, "--tok", ck + ".tok", "--prompt", "x", "-n", "2",
                "--max-tokens", "20", "--seed", s_).stdout
            for s_ in ("18446744073709551614", "18446744073709551615", "18446744073709551615")]
    check(outs[1] == outs[2] and outs[0] != outs[1],
          "seeds 2^64-2 and 2^64-1 differ, each replays: %r" % [o[-80:] for o in outs])
    # A checkpoint whose vocab is larger than its tokenizer's (sound
    # otherwise: its hash is right): refused at load, exit 2, not by a
    # decode error mid-campaign.
    with open(ck, "rb") as f:
        raw = f.read()
    body = raw[:-32]
    flags, V, C = struct.unpack_from("<3I", body, 12)
    n = struct.unpack_from("<Q", body, 56)[0]
    extra = 10 * C * 4
    arrays = [body[256 + k * n * 4: 256 + (k + 1) * n * 4] for k in range(3 if flags & 1 else 1)]
    head = bytearray(body[:256])
    struct.pack_into("<I", head, 16, V + 10)
    struct.pack_into("<Q", head, 56, n + 10 * C)
    grown = bytes(head) + b"".join(a[:V * C * 4] + bytes(extra) + a[V * C * 4:] for a in arrays)
    big = os.path.join(d, "bigvocab.ckpt")
    with open(big, "wb") as f:
        f.write(grown + hashlib.sha256(grown).digest())
    g = run("generate", "--ckpt", big, "--tok", ck + ".tok", "--prompt", "x")
    check(g.returncode == 2 and "model vocab %d, but the tokenizer has %d tokens" % (V + 10, V)
          in g.stderr, "a vocab larger than the tokenizer's: exit 2: %d %s"
          % (g.returncode, g.stderr[-300:]))
    t = run("tokenizer", "train", "--corpus", "/dev/zero", "--vocab", "300",
            "--out", os.path.join(d, "z.tok"))
    check(t.returncode == 2 and "not a regular file" in t.stderr,
          "tokenizer train --corpus /dev/zero: refused, not read until memory runs out: %s"
          % t.stderr[-200:])
    # A folder of 20,000 one-line files (230 KB of text) trains within a
    # 1 GB address space: each file kept a 64 KiB read buffer (1.3 GB; a
    # folder of 100,000 ran out under `ulimit -v 4000000`). ASan reserves
    # terabytes of shadow, so the limit is for the plain build only.
    asan = "asan" in subprocess.run(["ldd", KERNLAB], capture_output=True,
                                    text=True).stdout
    tiny_files = os.path.join(d, "tiny_files")
    os.mkdir(tiny_files)
    for i in range(20000):
        with open(os.path.join(tiny_files, "f%05d.cu" % i), "w") as f:
            f.write("int x%d;\n" % i)

    def limit_1gb():
        import resource
        resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))
    t = subprocess.run([KERNLAB, "tokenizer", "train", "--corpus", tiny_files, "--vocab", "300",
                        "--out", os.path.join(d, "tiny.tok")], capture_output=True, text=True,
                       timeout=120, preexec_fn=None if asan else limit_1gb)
    check(t.returncode == 0 and "from 20000 files" in t.stdout,
          "tokenizer train on 20,000 tiny files fits 1 GB: %d %s" % (t.returncode, t.stderr[-200:]))
    shutil.rmtree(tiny_files)
    nothing = os.path.join(d, "nothing")
    os.mkdir(nothing)
    p = run("prime", "--corpus", nothing, "--out", os.path.join(d, "n.ckpt"), "--size", "tiny")
    check(p.returncode == 2 and "no valid kernels" in p.stderr and "runtime error" not in p.stderr,
          "an empty corpus folder: exit 2, nothing undefined: %s" % p.stderr[-300:])
    # --out replaces only a file prime wrote: not someone's data, not a FIFO
    notes = os.path.join(d, "notes.txt")
    with open(notes, "w") as f:
        f.write("results I care about\n")
    fifo = os.path.join(d, "fifo")
    os.mkfifo(fifo)
    for target, says in ((notes, "not a file this command writes"),
                         (fifo, "not a regular file (a FIFO)"), (d, "is a folder")):
        p = run("prime", "--corpus", corpus, "--out", target, "--size", "tiny", "--steps", "1")
        check(p.returncode == 2 and says in p.stderr,
              "prime --out %s: refused: %d %s" % (target, p.returncode, p.stderr[-300:]))
    # a FIFO where a file is read: refused at once, not waited on
    for cmd in (["tokenizer", "info", "--tok", fifo],
                ["eval", os.path.join(SRC, "kernels", "seeds", "01_naive.cu"), "--reward",
                 fifo]):
        try:
            t = subprocess.run([KERNLAB, *cmd], capture_output=True, text=True, timeout=60)
            check(t.returncode == 2 and "not a regular file" in t.stderr,
                  "%s FIFO: refused: %d %s" % (cmd[0], t.returncode, t.stderr[-200:]))
        except subprocess.TimeoutExpired:
            check(False, "%s FIFO: hung" % cmd[0])
    # decode: a NUL byte among the ids is refused, not the end of the input
    for data, rc_want, says in ((b"65\0 66", 2, b"byte 2 is a NUL"), (b"65 66\n", 0, b"")):
        t = subprocess.run([KERNLAB, "tokenizer", "decode", "--tok", ck + ".tok"], input=data,
                           capture_output=True, timeout=60)
        check(t.returncode == rc_want and says in t.stderr and
              (rc_want or len(t.stdout) >= 2),
              "decode %r: exit %d: %d %r %r" % (data, rc_want, t.returncode, t.stdout, t.stderr))
    # --out in a folder that does not exist (`--out runs/policy.ckpt` in a
    # fresh clone): made, as every command's output folder is (they refused
    # it, exit 3); one that cannot be made (a file stands in its path) is
    # said before training
    tok_made = os.path.join(d, "nowhere", "sub", "x.tok")
    t = run("tokenizer", "train", "--corpus", corpus, "--vocab", "300", "--out", tok_made)
    check(t.returncode == 0 and os.path.isfile(tok_made),
          "tokenizer train --out in a missing folder: made: %d %r" % (t.returncode, t.stderr))
    t = run("tokenizer", "train", "--corpus", corpus, "--vocab", "300", "--out",
            os.path.join(tok_made, "y.tok"))
    check(t.returncode == 2 and "cannot write" in t.stderr and
          tok_made + " is a file, not a folder" in t.stderr and
          "vocab" not in t.stdout,
          "tokenizer train --out under a file: said first: %d %r" % (t.returncode, t.stderr))
    # prime: the same, said before training, not after every step (it
    # ended with exit 3 and a garbled name)
    ck_made = os.path.join(d, "elsewhere", "x.ckpt")
    t = run("prime", "--corpus", corpus, "--out", ck_made, "--size", "tiny", "--steps", "5")
    check(t.returncode == 0 and os.path.isfile(ck_made) and os.path.isfile(ck_made + ".tok"),
          "prime --out in a missing folder: made: %d %r" % (t.returncode, t.stderr[-300:]))
    t = run("prime", "--corpus", corpus, "--out", os.path.join(ck_made, "y.ckpt"),
            "--size", "tiny", "--steps", "5")
    check(t.returncode == 2 and ck_made + " is a file, not a folder" in t.stderr and
          "step" not in t.stderr,
          "prime --out under a file: said first: %d %r" % (t.returncode, t.stderr[-300:]))
    # --out longer than prime's 1100-byte name buffers: the tokenizer went
    # to X.ckpt.tok cut at 1099 bytes (a file named after part of a folder,
    # one level up) and the checkpoint had none beside it; now the pair is
    # written whole. A path too long for the system is refused before
    # training, as run refuses one.
    deep = os.path.join(d, *(["p" * 220] * 5))
    os.makedirs(deep)
    long_ck = os.path.join(deep, "x.ckpt")
    t = run("prime", "--corpus", corpus, "--out", long_ck, "--size", "tiny", "--steps", "2")
    g = run("generate", "--ckpt", long_ck, "--prompt", "x", "--max-tokens", "2")
    check(t.returncode == 0 and os.path.isfile(long_ck + ".tok") and g.returncode == 0 and
          not [f for f in os.listdir(os.path.dirname(deep)) if os.path.isfile(
              os.path.join(os.path.dirname(deep), f))],
          "prime --out of %d bytes: its tokenizer beside it: %d %d %r" %
          (len(long_ck), t.returncode, g.returncode, (t.stderr + g.stderr)[-300:]))
    shutil.rmtree(os.path.join(d, "p" * 220))
    t = run("prime", "--corpus", corpus, "--out", os.path.join(d, *(["q" * 220] * 20), "x.ckpt"),
            "--size", "tiny", "--steps", "2")
    check(t.returncode == 2 and "is too long" in t.stderr and "step" not in t.stderr,
          "prime --out too long for the system: refused first: %d %r" %
          (t.returncode, t.stderr[-300:]))
    # ... also where X.tok cut at PATH_MAX is a folder there: that folder
    # was checked as the --out's tokenizer, and the message (its 4095-byte
    # name, then 'is a folder') was cut to a part of the path, no reason
    far = d
    while len(far) < 4095:
        far = os.path.join(far, "s" * min(200, 4095 - len(far) - 1))
    os.makedirs(far)
    t = run("prime", "--corpus", corpus, "--out", os.path.join(far, "x.ckpt"),
            "--size", "tiny", "--steps", "2")
    check(len(far) == 4095 and t.returncode == 2 and "is too long" in t.stderr,
          "prime --out past PATH_MAX, its X.tok cut to a folder's name: too long: %d %r" %
          (t.returncode, t.stderr[-300:]))
    shutil.rmtree(os.path.join(d, "s" * 200))
    # prime --tok T: the checkpoint's tokenizer is written beside it too
    # (an earlier X.ckpt.tok stayed and paired the new checkpoint with a
    # tokenizer not its own)
    other_tok = os.path.join(d, "other.tok")
    t = run("tokenizer", "train", "--corpus", corpus, "--vocab", "300", "--out", other_tok)
    tk = os.path.join(d, "withtok.ckpt")
    shutil.copy(ck + ".tok", tk + ".tok")  # an earlier, different tokenizer there
    t2 = run("prime", "--corpus", corpus, "--out", tk, "--size", "tiny", "--steps", "5",
             "--tok", other_tok)
    g = run("generate", "--ckpt", tk, "--tok", tk + ".tok", "--prompt", "// task", "-n", "1",
            "--max-tokens", "8")
    check(t.returncode == 0 and t2.returncode == 0 and
          open(tk + ".tok", "rb").read() == open(other_tok, "rb").read() and g.returncode == 0,
          "prime --tok writes its tokenizer beside the checkpoint: %d %d %r" %
          (t2.returncode, g.returncode, g.stderr[-300:]))
    # tokenizer train over a checkpoint's own tokenizer (X.ckpt.tok beside
    # X.ckpt, which records another hash): refused, the pair untouched
    before = open(ck + ".tok", "rb").read()
    t = run("tokenizer", "train", "--corpus", corpus, "--vocab", "300", "--out", ck + ".tok")
    check(t.returncode == 2 and "would leave that checkpoint unusable" in t.stderr and
          open(ck + ".tok", "rb").read() == before,
          "tokenizer train over a checkpoint's tokenizer: refused: %d %r" % (t.returncode, t.stderr[-300:]))
    # --out replaces only a tokenizer: not its own corpus file
    one = os.path.join(d, "one.txt")
    with open(one, "w") as f:
        f.write("a corpus of one file " * 50)
    t = run("tokenizer", "train", "--corpus", one, "--vocab", "300", "--out", one)
    check(t.returncode == 2 and "not a file this command writes" in t.stderr and
          open(one).read().startswith("a corpus"),
          "tokenizer train --out its corpus: refused: %s" % t.stderr[-200:])
    t = run("tokenizer", "train", "--corpus", corpus, "--vocab", "300", "--out", fifo)
    check(t.returncode == 2 and "not a regular file" in t.stderr and
          stat.S_ISFIFO(os.lstat(fifo).st_mode),
          "tokenizer train --out FIFO: refused, the FIFO stays: %s" % t.stderr[-200:])
    check(open(notes).read() == "results I care about\n" and
          not os.path.exists(notes + ".tok"), "the file is untouched, no .tok next to it")
    for opt in (["--steps", "nan"], ["--seed", "-1"], ["--seed", "5x"], ["--seed", "0"]):
        p = run("prime", "--corpus", corpus, "--out", ck + ".x", *opt)
        check(p.returncode == 2 and "usage" in p.stderr and not os.path.exists(ck + ".x"),
              "prime %s: usage: %s" % (opt, p.stderr))
    # a batch whose activations cannot fit this machine (65536 windows of
    # 2047 tokens: ~1 TB, logits alone 550 GB) is refused before training,
    # naming the options, as run refuses a campaign's; it failed its first
    # forward and said 'the loss is nan', exit 3
    p = run("prime", "--corpus", corpus, "--out", ck + ".x", "--size", "tiny", "--steps", "1",
            "--batch", "65536", "--seq", "2047")
    check(p.returncode == 2 and "GB of activations" in p.stderr and
          "use a smaller --batch or --seq" in p.stderr and "nan" not in p.stderr and
          "step 1/" not in p.stderr and not os.path.exists(ck + ".x"),
          "prime --batch 65536 --seq 2047: refused before training: %d %s"
          % (p.returncode, p.stderr[-400:]))
    # a refused number says what was expected ('bad or missing value for
    # --steps' did not); a --seq past the model's context is refused, not
    # cut to max_seq - 1 without a word
    for opt, says in ((["--steps", "0"], "--steps 0: expected a whole number from 1 to 10000000"),
                      (["--batch", "0"], "--batch 0: expected a whole number from 1 to 65536"),
                      (["--seq", "1"], "--seq 1: expected a whole number from 2 to 65536"),
                      (["--seed", "0"], "--seed 0: expected a whole number from 1 to 2^64-1"),
                      (["--size", "tiny", "--seq", "4096"],
                       "--seq 4096: past the model's context: expected at most 2047 (the "
                       "model's max_seq is 2048)")):
        p = run("prime", "--corpus", corpus, "--out", ck + ".x", *opt)
        check(p.returncode == 2 and says in p.stderr and "step 1/" not in p.stderr and
              not os.path.exists(ck + ".x"),
              "prime %s: exit 2 saying what was expected: %d %s" % (opt, p.returncode, p.stderr))
    # Ctrl-C (SIGINT to the process group, as a terminal sends it): the
    # checkpoint of the step in flight is saved, exit 130, and it loads
    ick = os.path.join(d, "int.ckpt")
    rc, out_, err_ = interrupted([KERNLAB, "prime", "--corpus", corpus, "--out", ick, "--size",
                                  "tiny", "--steps", "100000", "--tok", ck + ".tok"],
                                 "step 11/", stream="stderr")
    m = re.search(r"interrupted: primed (\d+) of 100000 steps", out_)
    check(rc == 130 and m and int(m.group(1)) >= 11 and
          "the checkpoint is saved after this step" in err_,
          "prime, Ctrl-C: exit 130 with the step saved: %d %s %s" %
          (rc, out_[-300:], err_[-300:]))
    g = run("generate", "--ckpt", ick, "--tok", ck + ".tok", "--prompt", "x", "--max-tokens", "5")
    check(g.returncode == 0 and not [f for f in os.listdir(d) if ".tmp." in f],
          "the interrupted checkpoint loads, no temporary left: %s" % g.stderr[-300:])
    other = os.path.join(d, "other.ckpt")
    p = run("prime", "--corpus", corpus, "--out", other, "--size", "tiny", "--steps", "2",
            "--seed", "7")
    # Killed before its first checkpoint, a prime with another corpus (so
    # another tokenizer) over other.ckpt leaves the earlier pair as it was:
    # its tokenizer is written only with the checkpoint that uses it
    tok_before = open(other + ".tok", "rb").read()
    proc = subprocess.Popen([KERNLAB, "prime", "--corpus", os.path.join(SRC, "kernels", "seeds"),
                             "--out", other, "--size", "tiny", "--steps", "100000"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            errors="replace")
    for line in proc.stderr:
        if line.startswith("step 1/"):
            break
    proc.kill()
    proc.communicate(timeout=60)
    g = run("generate", "--ckpt", other, "--tok", other + ".tok", "--prompt", "x",
            "--max-tokens", "5")
    check(open(other + ".tok", "rb").read() == tok_before and g.returncode == 0,
          "a prime killed before its first checkpoint: the earlier checkpoint and "
          "tokenizer still pair: %s" % g.stderr[-300:])
    # Its checkpoint replaced by another process between two saves (as by a
    # second prime to the same --out): the next save stops, exit 3, and
    # leaves the other file in place
    rep = os.path.join(d, "rep.ckpt")
    proc = subprocess.Popen([KERNLAB, "prime", "--corpus", corpus, "--out", rep, "--size",
                             "tiny", "--steps", "250", "--tok", ck + ".tok"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            errors="replace")
    for line in proc.stderr:
        if line.startswith("step 111/"):
            break
    shutil.copy(rep, rep + ".other")
    os.rename(rep + ".other", rep)
    other_bytes = open(rep, "rb").read()
    out_, err_ = proc.communicate(timeout=600)
    check(proc.returncode == 3 and "was replaced by another process" in err_ and
          open(rep, "rb").read() == other_bytes,
          "a checkpoint replaced between saves: stop, the other kept: %d %s"
          % (proc.returncode, err_[-300:]))
    # The tokenizer cannot be renamed into place after its checkpoint was
    # (a folder appeared at its name): exit 3, and the message names where
    # the checkpoint's tokenizer is, which is kept
    tk = os.path.join(d, "tk.ckpt")
    proc = subprocess.Popen([KERNLAB, "prime", "--corpus", corpus, "--out", tk, "--size",
                             "tiny", "--steps", "150"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            errors="replace")
    for line in proc.stderr:
        if line.startswith("step 1/"):
            break
    os.makedirs(os.path.join(tk + ".tok", "in-the-way"))
    out_, err_ = proc.communicate(timeout=600)
    kept = [f for f in os.listdir(d) if f.startswith("tk.ckpt.tok.tmp.")]
    check(proc.returncode == 3 and "its tokenizer is" in err_ and len(kept) == 1 and
          kept[0] in err_,
          "a tokenizer that cannot take its name: kept and named: %d %s %s"
          % (proc.returncode, kept, err_[-300:]))
    # What a kill between the two renames leaves (the checkpoint saved, its
    # tokenizer under the temporary name): run and generate name the
    # leftover whose hash the checkpoint records, and not a decoy
    shutil.rmtree(tk + ".tok")
    decoy = tk + ".tok.tmp.1"
    shutil.copy(other_tok, decoy)
    g = run("generate", "--ckpt", tk, "--tok", tk + ".tok", "--prompt", "x")
    check(g.returncode == 2 and kept and kept[0] + " holds the checkpoint's tokenizer" in g.stderr
          and "rename it to " + tk + ".tok" in g.stderr and decoy + " holds" not in g.stderr,
          "a missing tokenizer: its leftover named: %d %s" % (g.returncode, g.stderr[-400:]))
    g = run("generate", "--ckpt", tk, "--prompt", "x")
    check(g.returncode == 2 and "no --tok given" in g.stderr and kept and
          kept[0] + " holds the checkpoint's tokenizer" in g.stderr,
          "no --tok, CKPT.tok missing: its leftover named: %d %s" % (g.returncode, g.stderr[-400:]))
    shutil.copy(other_tok, tk + ".tok")  # a tokenizer not its own in its place
    g = run("generate", "--ckpt", tk, "--tok", tk + ".tok", "--prompt", "x")
    check(g.returncode == 2 and "tokenizer mismatch" in g.stderr and kept and
          kept[0] + " holds the checkpoint's tokenizer" in g.stderr,
          "a mismatched tokenizer: the leftover named: %d %s" % (g.returncode, g.stderr[-400:]))
    if kept:
        os.replace(os.path.join(d, kept[0]), tk + ".tok")
    g = run("generate", "--ckpt", tk, "--tok", tk + ".tok", "--prompt", "x", "--max-tokens", "4")
    check(g.returncode == 0, "renamed as told, the pair loads: %d %s" % (g.returncode, g.stderr[-300:]))
    tok2 = os.path.join(d, "t2.tok")
    t = run("tokenizer", "train", "--corpus", os.path.join(SRC, "kernels", "seeds"),
            "--vocab", "300", "--out", tok2)
    g = run("generate", "--ckpt", ck, "--tok", tok2, "--prompt", "x")
    check(t.returncode == 0 and g.returncode == 2 and "tokenizer" in g.stderr.lower(),
          "mismatched tokenizer: exit 2: %s %s" % (t.stderr[-200:], g.stderr[-300:]))

done()
