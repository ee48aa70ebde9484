#!/usr/bin/python3
"""tests/bench/bench_policy_torch.py - the PyTorch baseline of bench_policy:
the same model (tests/python/policy_torch_model.py) trained on a fixed
random batch, float32; one training step = forward, cross-entropy,
backward, clip_grad_norm_(1.0), AdamW. Median of STEPS timed steps after
one warm-up. Prints
    torch: X ms/step, loss L, N tok/s

usage: bench_policy_torch.py V C L NH F B T STEPS [INTRA_OP_THREADS]
(OpenBLAS's own thread count comes from OPENBLAS_NUM_THREADS, set by the
caller.)
"""
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "python"))
import policy_torch_model as ptm  # noqa: E402


def main():
    V, C, L, NH, FF, B, T, steps = (int(x) for x in sys.argv[1:9])
    torch.set_num_threads(int(sys.argv[9]) if len(sys.argv) > 9 else 2)
    torch.manual_seed(1)
    sizes = ptm.shapes(V, C, L, FF)
    flat = torch.cat([
        (torch.ones(s) if n.startswith("rms") else torch.randn(s) * 0.02)
        .reshape(-1) for n, s in sizes.items()])
    P = ptm.unflatten(flat, V, C, L, FF)
    opt = ptm.make_adamw(P, 3e-4, 0.9, 0.95, 1e-8, 0.1)
    params = list(P.values())
    cos, sin = ptm.rope_tables(T, C // NH)
    tokens = torch.randint(0, V, (B, T))
    targets = torch.roll(tokens, -1, dims=1)
    times = []
    for i in range(steps + 1):
        t0 = time.perf_counter()
        opt.zero_grad()
        logits = ptm.forward(P, tokens, NH, cos, sin)
        loss = torch.nn.functional.cross_entropy(logits.view(-1, V),
                                                 targets.view(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        if i:
            times.append(time.perf_counter() - t0)
    t = statistics.median(times)
    print(f"torch: {t * 1e3:.1f} ms/step, loss {loss.item():.4f}, "
          f"{B * T / t:.0f} tok/s", flush=True)


if __name__ == "__main__":
    main()
