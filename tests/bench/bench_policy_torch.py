#!/usr/bin/python3
"""tests/bench/bench_policy_torch.py - the PyTorch baseline of bench_policy:
the same model (tests/python/policy_torch_model.py) trained on a fixed
random batch, float32; one training step = forward, cross-entropy,
backward, clip_grad_norm_(1.0), AdamW. Median of STEPS timed steps after
one warm-up. Prints
    torch: X ms/step, loss L, N tok/s

With --sample, sampling instead: G = B rows of T new tokens after a 64-token
prompt, T = 1 multinomial sampling with a KV cache (prefill once, the cache
shared by every row, one token per row per step, as pl_generate does),
under torch.no_grad. Prints
    torch sampling: N tok/s (S s)

With --device cuda (or auto: cuda when torch.cuda.is_available()), the
same on the GPU (tests/bench/bench_policy_cuda.c): every tensor made there
(torch.set_default_device, torch >= 2.0), fp32 matmuls without TF32 (the
policy's CUDA runtime does not use it either), torch.cuda.synchronize()
around every timed region, and one untimed short sampling run first (CUDA
and cuBLAS initialise there). It first prints
    torch device: cuda (NAME), torch VERSION
The default is the CPU, as bench_policy.c runs it.

usage: bench_policy_torch.py V C L NH F B T STEPS [INTRA_OP_THREADS] [--sample]
                             [--device cpu|cuda|auto]
(OpenBLAS's own thread count comes from OPENBLAS_NUM_THREADS, set by the
caller.)
"""
import math
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "python"))
import policy_torch_model as ptm  # noqa: E402


def attend(P, l, h, kc, vc, pos, NH, cos, sin):
    """One layer's attention for h (G,n,C) at positions pos..pos+n-1, with
    the cache kc, vc (G,NH,max,hs) filled up to pos; returns (G,n,C)."""
    G, n, C = h.shape
    hs = C // NH
    q, k, v = (h @ P["wqkv"][l].t()).split(C, dim=-1)
    c, s = cos[pos:pos + n], sin[pos:pos + n]
    q = ptm.rope(q.view(G, n, NH, hs), c, s).transpose(1, 2)
    k = ptm.rope(k.view(G, n, NH, hs), c, s).transpose(1, 2)
    kc[:, :, pos:pos + n] = k
    vc[:, :, pos:pos + n] = v.view(G, n, NH, hs).transpose(1, 2)
    keys, vals = kc[:, :, :pos + n], vc[:, :, :pos + n]
    att = (q @ keys.transpose(-2, -1)) / math.sqrt(hs)
    if n > 1:
        mask = torch.ones(n, pos + n, dtype=torch.bool).triu(pos + 1)
        att = att.masked_fill(mask, float("-inf"))
    y = (att.softmax(dim=-1) @ vals).transpose(1, 2).reshape(G, n, C)
    return y @ P["wo"][l].t()


def step(P, tok, kc, vc, pos, NH, cos, sin):
    """tok (G,n) -> logits of the last position (G,V)."""
    x = P["wte"][tok]
    FF = P["w2"].shape[2]
    for l in range(P["wqkv"].shape[0]):
        x = x + attend(P, l, ptm.rmsnorm(x, P["rms_att"][l]), kc[l], vc[l],
                       pos, NH, cos, sin)
        g, u = (ptm.rmsnorm(x, P["rms_ffn"][l]) @ P["w13"][l].t()).split(
            FF, dim=-1)
        x = x + (torch.nn.functional.silu(g) * u) @ P["w2"][l].t()
    return ptm.rmsnorm(x[:, -1], P["rms_final"]) @ P["wte"].t()


def sync():
    """Waits for the GPU's queued work (nothing on the CPU)."""
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()


def sample(P, V, C, L, NH, G, new, prompt_len=64, report=True):
    hs = C // NH
    cos, sin = ptm.rope_tables(prompt_len + new, hs)
    prompt = torch.randint(0, V, (1, prompt_len))
    with torch.no_grad():
        sync()
        t0 = time.perf_counter()
        kc = torch.zeros(L, G, NH, prompt_len + new, hs)
        vc = torch.zeros(L, G, NH, prompt_len + new, hs)
        k1 = torch.zeros(L, 1, NH, prompt_len + new, hs)
        v1 = torch.zeros(L, 1, NH, prompt_len + new, hs)
        logits = step(P, prompt, k1, v1, 0, NH, cos, sin).expand(G, V)
        kc[:, :, :, :prompt_len] = k1[:, :, :, :prompt_len]
        vc[:, :, :, :prompt_len] = v1[:, :, :, :prompt_len]
        for i in range(new):
            tok = torch.multinomial(logits.softmax(dim=-1), 1)
            if i + 1 == new:
                break
            logits = step(P, tok, kc, vc, prompt_len + i, NH, cos, sin)
        sync()
        dt = time.perf_counter() - t0
    if report:
        print(f"torch sampling: {G * new / dt:.0f} tok/s ({dt:.2f} s)",
              flush=True)


def use_device(argv):
    """--device cpu|cuda|auto: makes it the default device; returns it."""
    want = argv[argv.index("--device") + 1] if "--device" in argv else "cpu"
    if want == "auto":
        want = "cuda" if torch.cuda.is_available() else "cpu"
    if want == "cpu":
        return want
    if want != "cuda" or not torch.cuda.is_available():
        sys.exit(f"bench_policy_torch: --device {want}: torch "
                 f"{torch.__version__} has no CUDA device here")
    if not hasattr(torch, "set_default_device"):
        sys.exit(f"bench_policy_torch: torch {torch.__version__} is older "
                 "than 2.0 (no torch.set_default_device)")
    torch.set_default_device("cuda")
    # true fp32 GEMMs, as cuBLAS gets in pcuda (no TF32): the newer switch
    # where torch has it, else the older one
    matmul = torch.backends.cuda.matmul
    if hasattr(matmul, "fp32_precision"):
        matmul.fp32_precision = "ieee"
    else:
        matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    precision = getattr(matmul, "fp32_precision",
                        "tf32" if matmul.allow_tf32 else "ieee")
    print(f"torch device: cuda ({torch.cuda.get_device_name(0)}), torch "
          f"{torch.__version__}, fp32 matmul precision {precision}", flush=True)
    return want


def main():
    V, C, L, NH, FF, B, T, steps = (int(x) for x in sys.argv[1:9])
    rest = [a for a in sys.argv[9:] if a != "--sample"]
    if "--device" in rest:
        i = rest.index("--device")
        rest = rest[:i] + rest[i + 2:]
    torch.set_num_threads(int(rest[0]) if rest else 2)
    dev = use_device(sys.argv)
    torch.manual_seed(1)
    sizes = ptm.shapes(V, C, L, FF)
    flat = torch.cat([
        (torch.ones(s) if n.startswith("rms") else torch.randn(s) * 0.02)
        .reshape(-1) for n, s in sizes.items()])
    P = ptm.unflatten(flat, V, C, L, FF)
    if "--sample" in sys.argv:
        if dev == "cuda":
            sample(P, V, C, L, NH, B, 8, report=False)  # warm-up, untimed
        sample(P, V, C, L, NH, B, T)
        return
    opt = ptm.make_adamw(P, 3e-4, 0.9, 0.95, 1e-8, 0.1)
    params = list(P.values())
    cos, sin = ptm.rope_tables(T, C // NH)
    tokens = torch.randint(0, V, (B, T))
    targets = torch.roll(tokens, -1, dims=1)
    times = []
    for i in range(steps + 1):
        sync()
        t0 = time.perf_counter()
        opt.zero_grad()
        logits = ptm.forward(P, tokens, NH, cos, sin)
        loss = torch.nn.functional.cross_entropy(logits.view(-1, V),
                                                 targets.view(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        sync()
        if i:
            times.append(time.perf_counter() - t0)
    t = statistics.median(times)
    print(f"torch: {t * 1e3:.1f} ms/step, loss {loss.item():.4f}, "
          f"{B * T / t:.0f} tok/s", flush=True)


if __name__ == "__main__":
    main()
