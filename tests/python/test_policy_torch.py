#!/usr/bin/python3
"""tests/python/test_policy_torch.py - the policy model against PyTorch
(llm.c's method): same tiny config, same weights, same batch.

Runs tests/policy_torch_driver (C) to write its init weights, batch, logits,
loss, gradients (mean loss and GRPO-weighted), and the losses of 10 AdamW
steps; rebuilds the model in torch 1.13 float32 (policy_torch_model.py)
from those weights and compares. Tolerances (fp32 on both sides):
  logits           |c - t| <= 1e-4 absolute, every element
  loss             |c - t| <= 1e-5
  gradients        max |c - t| <= 1e-4 * max |t|, per parameter tensor
                   (mean-loss and weighted backward alike)
  10 AdamW steps   loss per step within 1e-4; lr within 1e-7 relative;
                   global grad norm within 1e-4 relative

Needs Debian's python3-torch (scripts/deps.sh): fails, not skips, without.
usage: test_policy_torch.py POLICY_TORCH_DRIVER
"""
import os
import subprocess
import sys
import tempfile

try:
    import numpy as np
    import torch
except ImportError as e:
    print(f"FAIL: {sys.executable} cannot import torch/numpy ({e}); "
          "install python3-torch (scripts/deps.sh)")
    sys.exit(1)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import policy_torch_model as ptm  # noqa: E402

LOGIT_TOL, LOSS_TOL, GRAD_REL_TOL = 1e-4, 1e-5, 1e-4
STEP_LOSS_TOL, NORM_REL_TOL = 1e-4, 1e-4

failures = []


def check(ok, msg):
    print(("ok   " if ok else "FAIL ") + msg)
    if not ok:
        failures.append(msg)


class Reader:
    def __init__(self, data):
        self.data, self.off = data, 0

    def take(self, dtype, n):
        a = np.frombuffer(self.data, dtype=dtype, count=n, offset=self.off)
        self.off += a.nbytes
        return a


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: test_policy_torch.py POLICY_TORCH_DRIVER")
    torch.set_num_threads(2)
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "policy_ref.bin")
        subprocess.run([sys.argv[1], out], check=True)
        data = open(out, "rb").read()
    r = Reader(data)
    hdr = r.take("<i4", 256)
    assert hdr[0] == 20250901 and hdr[1] == 1, "bad magic/version"
    V, C, L, NH, FF, maxT, B, T, steps, nparams = (int(x) for x in hdr[2:12])
    lr, b1, b2, eps, wd, clip, warm, total, final_frac, sched = (
        float(x) for x in r.take("<f4", 16)[:10])
    flat = torch.from_numpy(r.take("<f4", nparams).copy())
    tokens = torch.from_numpy(r.take("<i4", B * T).astype(np.int64)).view(B, T)
    targets = torch.from_numpy(r.take("<i4", B * T).astype(np.int64)).view(B, T)
    c_logits = torch.from_numpy(r.take("<f4", B * T * V).copy()).view(B, T, V)
    c_loss = float(r.take("<f4", 1)[0])
    c_grads = torch.from_numpy(r.take("<f4", nparams).copy())
    w = torch.from_numpy(r.take("<f4", B * T).copy()).view(B, T)
    c_wgrads = torch.from_numpy(r.take("<f4", nparams).copy())
    c_steps = r.take("<f4", 3 * steps).reshape(steps, 3)
    assert r.off == len(data), (r.off, len(data))
    print(f"config: V={V} C={C} L={L} NH={NH} F={FF} B={B} T={T}, "
          f"{nparams} parameters, torch {torch.__version__}")

    cos, sin = ptm.rope_tables(maxT, C // NH)
    P = ptm.unflatten(flat, V, C, L, FF)

    # forward: logits and loss
    logits = ptm.forward(P, tokens, NH, cos, sin)
    loss = torch.nn.functional.cross_entropy(
        logits.view(-1, V), targets.view(-1), ignore_index=-1)
    d = (logits.detach() - c_logits).abs().max().item()
    check(d <= LOGIT_TOL, f"logits: max |diff| {d:.3g} <= {LOGIT_TOL}")
    d = abs(loss.item() - c_loss)
    check(d <= LOSS_TOL, f"loss: C {c_loss:.7f} torch {loss.item():.7f}, "
          f"|diff| {d:.3g} <= {LOSS_TOL}")

    def compare_grads(c_flat, label):
        g = ptm.unflatten(c_flat, V, C, L, FF)
        for name in ptm.NAMES:
            t = P[name].grad
            scale = t.abs().max().item()
            d = (g[name].detach() - t).abs().max().item()
            check(d <= GRAD_REL_TOL * scale,
                  f"{label} grad {name:9s}: max |diff| {d:.3g} <= "
                  f"{GRAD_REL_TOL} * {scale:.3g}")

    loss.backward()
    compare_grads(c_grads, "mean-loss")

    # the GRPO hook: loss = sum_t w_t * logp_t over counted positions
    for p in P.values():
        p.grad = None
    logits = ptm.forward(P, tokens, NH, cos, sin)
    logp = -torch.nn.functional.cross_entropy(
        logits.view(-1, V), targets.view(-1), ignore_index=-1,
        reduction="none")
    (w.view(-1) * logp).sum().backward()
    compare_grads(c_wgrads, "weighted ")

    # 10 AdamW steps on the same batch
    P = ptm.unflatten(flat, V, C, L, FF)
    opt = ptm.make_adamw(P, lr, b1, b2, eps, wd)
    params = [P[n] for n in ptm.NAMES]
    clipped = 0
    for step in range(steps):
        opt.zero_grad()
        logits = ptm.forward(P, tokens, NH, cos, sin)
        loss = torch.nn.functional.cross_entropy(
            logits.view(-1, V), targets.view(-1), ignore_index=-1)
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(params, clip).item()
        clipped += norm > clip
        step_lr = ptm.lr_at(step, lr, int(warm), int(total), final_frac,
                            int(sched))
        for g in opt.param_groups:
            g["lr"] = step_lr
        opt.step()
        c_l, c_lr, c_norm = (float(x) for x in c_steps[step])
        check(abs(c_l - loss.item()) <= STEP_LOSS_TOL
              and abs(c_lr - step_lr) <= 1e-7 * step_lr
              and abs(c_norm - norm) <= NORM_REL_TOL * norm,
              f"step {step}: loss C {c_l:.6f} torch {loss.item():.6f}; "
              f"lr C {c_lr:.6g} torch {step_lr:.6g}; "
              f"norm C {c_norm:.5f} torch {norm:.5f}")
    check(clipped > 0 and c_steps[-1][0] < c_steps[0][0] - 0.1,
          f"the run clipped {clipped} of {steps} steps and the loss fell "
          f"{c_steps[0][0]:.4f} -> {c_steps[-1][0]:.4f}")

    if failures:
        print(f"test_policy_torch: {len(failures)} FAILED")
        return 1
    print("test_policy_torch: all ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
