#!/usr/bin/python3
"""tests/python/test_grpo_torch.py - policy/grpo.c against PyTorch.

The GRPO formulas are written again here in torch, independently of the C
code, from shared/research/policy-anchors.md section 3 (TRL GRPOTrainer):
advantages (nanmean / Bessel nanstd per group or batch, + 1e-4, NaN -> 0),
the per-token clipped surrogate with clip-higher, the k3 KL to a reference,
truncation masking and the four aggregations (grpo, bnpo, dr_grpo, dapo,
with grad accumulation and dapo's num_items). The gradient d loss / d logp
comes from autograd. tests/grpo_driver (C) runs the same random batches;
every loss_type x scale_rewards x beta x eps_high x mask_truncated x
old_logp-given combination is run on its own random batch (192 in all),
with some NaN rewards, groups of equal rewards and empty rows.

Both sides compute in float64 from the same float32 inputs; the loss on the
torch side takes the float32 advantages C produced (compared first), and C
writes float32 gradients. Tolerances:
  advantages   |c - t| <= 1e-6 * max(|t|, 1)          (float32 rounding)
  loss, stats  |c - t| <= 1e-9 * max(|t|, 1)          (float64 both sides)
  dloss_dlogp  |c - t| <= 1e-6 * max(|t|, max |t|)    per batch
  clip decisions must agree exactly (clip fractions are compared as stats).

Needs Debian's python3-torch (scripts/deps.sh): fails, not skips, without.
usage: test_grpo_torch.py GRPO_DRIVER
"""
import itertools
import os
import struct
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

LOSS_TYPES = ["grpo", "bnpo", "dr_grpo", "dapo"]
SCALES = ["group", "batch", "none"]
STAT_NAMES = ["loss", "policy_loss", "kl_loss", "kl_mean", "ratio_mean",
              "clip_low", "clip_high", "clip_fraction", "active_tokens"]
ADV_TOL, LOSS_TOL, GRAD_TOL = 1e-6, 1e-9, 1e-6

failures = []


def check(ok, msg):
    if not ok:
        print("FAIL " + msg)
        failures.append(msg)


# ---- the reference, in torch -------------------------------------------

def torch_advantages(rewards, n_groups, G, scale):
    """TRL's sum_then_normalize advantages. rewards: (B,) float64."""
    r = rewards.view(n_groups, G)
    mean_g = torch.nanmean(r, dim=1, keepdim=True)

    def nanstd(x, dim=None):
        # torch 1.13 has no nanstd: Bessel-corrected, over non-NaN values
        valid = ~torch.isnan(x)
        if dim is None:
            cnt = valid.sum()
            mu = torch.nanmean(x)
            return torch.sqrt(torch.nansum((x - mu) ** 2) / (cnt - 1))
        cnt = valid.sum(dim=dim, keepdim=True)
        mu = torch.nanmean(x, dim=dim, keepdim=True)
        return torch.sqrt(torch.nansum((x - mu) ** 2, dim=dim, keepdim=True)
                          / (cnt - 1))

    a = r - mean_g
    if scale == "group":
        a = a / (nanstd(r, dim=1) + 1e-4)
    elif scale == "batch":
        a = a / (nanstd(rewards) + 1e-4)
    a = a.reshape(-1)
    a[torch.isnan(a)] = 0.0
    return a


def torch_loss(cfg, logp, old_logp, ref_logp, adv, mask, truncated):
    """Aggregated GRPO loss and its parts; logp is the autograd leaf."""
    B, T = logp.shape
    if cfg["mask_truncated"]:
        mask = mask * (1.0 - truncated.double()).unsqueeze(1)
    old = logp.detach() if old_logp is None else old_logp
    ratio = torch.exp(logp - old)
    A = adv.unsqueeze(1)
    clipped = torch.clamp(ratio, 1 - cfg["eps_low"], 1 + cfg["eps_high"])
    pg = -torch.min(ratio * A, clipped * A)
    if cfg["beta"] > 0:
        d = ref_logp - logp
        kl = torch.exp(d) - d - 1
    else:
        kl = torch.zeros_like(logp)
    per_token = pg + cfg["beta"] * kl
    accum = max(cfg["grad_accum_steps"], 1)
    n_tok = mask.sum()

    def aggregate(x):
        lt = cfg["loss_type"]
        if lt == "grpo":
            return ((x * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)).mean() / accum
        if lt == "bnpo":
            return (x * mask).sum() / n_tok.clamp(min=1.0) / accum
        if lt == "dr_grpo":
            return (x * mask).sum() / (B * cfg["max_completion_length"]) / accum
        items = cfg["num_items"] if cfg["num_items"] > 0 else n_tok
        return (x * mask).sum() / torch.clamp(torch.as_tensor(items, dtype=torch.float64), min=1.0)

    loss = aggregate(per_token)
    denom = n_tok.clamp(min=1.0) if n_tok > 0 else None
    low = ((ratio < 1 - cfg["eps_low"]) & (A < 0)).double()
    high = ((ratio > 1 + cfg["eps_high"]) & (A > 0)).double()

    def tmean(x):
        return float((x * mask).sum() / denom) if denom is not None else 0.0

    stats = {
        "loss": float(loss), "policy_loss": float(aggregate(pg)),
        "kl_loss": float(aggregate(cfg["beta"] * kl)),
        "kl_mean": tmean(kl.detach()), "ratio_mean": tmean(ratio.detach()),
        "clip_low": tmean(low), "clip_high": tmean(high),
        "clip_fraction": tmean(low) + tmean(high),
        "active_tokens": float(n_tok),
    }
    return loss, stats


# ---- the C side ----------------------------------------------------------

def run_driver(driver, tmp, cfg, batch):
    n_groups, G, T = batch["n_groups"], batch["G"], batch["T"]
    flags = (1 if batch["old"] is not None else 0) | \
            (2 if batch["ref"] is not None else 0)
    B = n_groups * G
    zeros = np.zeros((B, T), np.float32)
    with open(os.path.join(tmp, "in.bin"), "wb") as f:
        f.write(struct.pack("<9i", n_groups, G, T,
                            LOSS_TYPES.index(cfg["loss_type"]),
                            SCALES.index(cfg["scale_rewards"]),
                            cfg["mask_truncated"], cfg["max_completion_length"],
                            cfg["grad_accum_steps"], flags))
        f.write(struct.pack("<4d", cfg["beta"], cfg["eps_low"],
                            cfg["eps_high"], cfg["num_items"]))
        f.write(batch["rewards"].astype("<f8").tobytes())
        for a in (batch["logp"], batch["old"], batch["ref"], batch["mask"]):
            f.write((zeros if a is None else a).astype("<f4").tobytes())
        f.write(batch["truncated"].astype(np.uint8).tobytes())
    r = subprocess.run([driver, os.path.join(tmp, "in.bin"),
                        os.path.join(tmp, "out.bin")],
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"grpo_driver exited {r.returncode}: {r.stderr}")
    data = open(os.path.join(tmp, "out.bin"), "rb").read()
    rc = struct.unpack_from("<i", data)[0]
    if rc != 0:
        return rc, None
    off = 4
    adv = np.frombuffer(data, "<f4", B, off); off += 4 * B
    dloss = np.frombuffer(data, "<f4", B * T, off).reshape(B, T); off += 4 * B * T
    stats = dict(zip(STAT_NAMES, np.frombuffer(data, "<f8", 9, off)))
    return rc, {"adv": adv, "dloss": dloss, "stats": stats}


def make_batch(rng, old_given, need_ref):
    n_groups, G = int(rng.integers(1, 5)), int(rng.integers(2, 9))
    T = int(rng.integers(1, 13))
    B = n_groups * G
    rewards = rng.choice([0.0, 1.0, 0.5, -1.0, 2.5], size=B) + \
        (rng.normal(0, 0.3, B) if rng.random() < 0.5 else 0)
    if n_groups > 1 and rng.random() < 0.5:
        rewards[:G] = rewards[0]                  # a group of equal rewards
    if rng.random() < 0.3:
        rewards[rng.integers(0, B)] = np.nan      # a reward function's None
    logp = -rng.exponential(1.0, (B, T)).astype(np.float32)
    old = (logp + rng.normal(0, 0.3, (B, T))).astype(np.float32) if old_given else None
    ref = (logp + rng.normal(0, 0.5, (B, T))).astype(np.float32) if need_ref else None
    lengths = rng.integers(0, T + 1, B)           # 0: an empty completion
    mask = (np.arange(T)[None, :] < lengths[:, None]).astype(np.float32)
    truncated = (lengths == T) & (rng.random(B) < 0.7)
    return {"n_groups": n_groups, "G": G, "T": T, "rewards": rewards,
            "logp": logp, "old": old, "ref": ref, "mask": mask,
            "truncated": truncated}


def compare(tag, cfg, batch, c):
    B, T = batch["n_groups"] * batch["G"], batch["T"]
    adv = torch_advantages(torch.tensor(batch["rewards"], dtype=torch.float64),
                           batch["n_groups"], batch["G"], cfg["scale_rewards"])
    err = np.abs(c["adv"] - adv.numpy()) / np.maximum(np.abs(adv.numpy()), 1.0)
    check(err.max() <= ADV_TOL, f"{tag}: advantages off by {err.max():.3g} "
          f"(C {c['adv']}, torch {adv.numpy()})")
    # the loss is checked on its own: torch takes the float32 advantages C
    # produced (checked just above), so one ulp of difference there does not
    # show up as a loss difference
    adv32 = torch.tensor(c["adv"], dtype=torch.float64)
    logp = torch.tensor(batch["logp"], dtype=torch.float64, requires_grad=True)
    as64 = (lambda a: None if a is None else torch.tensor(a, dtype=torch.float64))
    loss, stats = torch_loss(cfg, logp, as64(batch["old"]), as64(batch["ref"]),
                             adv32, torch.tensor(batch["mask"], dtype=torch.float64),
                             torch.tensor(batch["truncated"]))
    loss.backward()
    for k in STAT_NAMES:
        e = abs(c["stats"][k] - stats[k])
        check(e <= LOSS_TOL * max(abs(stats[k]), 1.0),
              f"{tag}: {k} C {c['stats'][k]!r} torch {stats[k]!r}")
    g = logp.grad.numpy()
    scale = np.maximum(np.abs(g), np.abs(g).max())
    gerr = np.abs(c["dloss"] - g) / np.where(scale > 0, scale, 1.0)
    check(gerr.max() <= GRAD_TOL, f"{tag}: dloss_dlogp off by {gerr.max():.3g}")
    check(np.all(c["dloss"][batch["mask"] == 0] == 0),
          f"{tag}: nonzero gradient on a masked token")
    return err.max(), gerr.max(), stats


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: test_grpo_torch.py GRPO_DRIVER")
    driver = sys.argv[1]
    torch.set_num_threads(1)
    rng = np.random.default_rng(20250329)
    n = 0
    worst_adv = worst_grad = 0.0
    clip_seen = {"low": 0, "high": 0}
    with tempfile.TemporaryDirectory() as tmp:
        for lt, sc, beta, eps_high, mt, old_given in itertools.product(
                LOSS_TYPES, SCALES, [0.0, 0.04], [0.2, 0.28], [0, 1],
                [True, False]):
            cfg = {"loss_type": lt, "scale_rewards": sc, "beta": beta,
                   "eps_low": 0.2, "eps_high": eps_high, "mask_truncated": mt,
                   "max_completion_length": 16,
                   "grad_accum_steps": int(rng.choice([0, 1, 3])),
                   "num_items": float(rng.choice([0.0, 0.0, 57.0]))}
            batch = make_batch(rng, old_given, beta > 0)
            tag = (f"{lt}/{sc} beta={beta} eps_high={eps_high} "
                   f"mask_truncated={mt} old={'given' if old_given else 'None'}")
            rc, c = run_driver(driver, tmp, cfg, batch)
            check(rc == 0, f"{tag}: driver rc {rc}")
            if rc != 0:
                continue
            ea, eg, st = compare(tag, cfg, batch, c)
            worst_adv, worst_grad = max(worst_adv, ea), max(worst_grad, eg)
            clip_seen["low"] += st["clip_low"] > 0
            clip_seen["high"] += st["clip_high"] > 0
            n += 1
        # beta > 0 without a reference is an error, not a crash
        cfg = {"loss_type": "dapo", "scale_rewards": "group", "beta": 0.1,
               "eps_low": 0.2, "eps_high": 0.2, "mask_truncated": 0,
               "max_completion_length": 16, "grad_accum_steps": 1,
               "num_items": 0.0}
        batch = make_batch(rng, True, False)
        rc, _ = run_driver(driver, tmp, cfg, batch)
        check(rc == 2, f"beta without ref_logp: rc {rc}, want 2 (PL_EINPUT)")
    check(clip_seen["low"] > 10 and clip_seen["high"] > 10,
          f"too few batches clip: {clip_seen}")
    print(f"{n} batches; worst relative error: advantages {worst_adv:.2e}, "
          f"dloss_dlogp {worst_grad:.2e}; batches clipping low/high "
          f"{clip_seen['low']}/{clip_seen['high']}")
    if failures:
        print(f"{len(failures)} failures")
        sys.exit(1)
    print("ok")


if __name__ == "__main__":
    main()
