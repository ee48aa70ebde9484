"""tests/python/policy_torch_model.py - the policy transformer written again
in PyTorch, as plainly as possible, for the cross-check
(test_policy_torch.py) and the benchmark (tests/bench/bench_policy.c).

It mirrors policy/model.c's math (see policy/policy.h) without reading any
of its code: RMSNorm eps 1e-5 with weight, RoPE theta 10000 on interleaved
pairs (2i, 2i+1), causal attention scaled by 1/sqrt(hs), SwiGLU, a final
RMSNorm and an output head tied to the embedding. Parameters are the same
eight stacked tensors, in the same order, as the C model's flat buffer.
"""
import math

import torch
import torch.nn.functional as F

NAMES = ["wte", "rms_att", "wqkv", "wo", "rms_ffn", "w13", "w2", "rms_final"]
DECAYS = {"wqkv", "wo", "w13", "w2"}  # AdamW weight decay; not norms or wte


def shapes(V, C, L, FF):
    return {
        "wte": (V, C),
        "rms_att": (L, C),
        "wqkv": (L, 3 * C, C),
        "wo": (L, C, C),
        "rms_ffn": (L, C),
        "w13": (L, 2 * FF, C),
        "w2": (L, C, FF),
        "rms_final": (C,),
    }


def unflatten(flat, V, C, L, FF):
    """Splits a flat float32 tensor into the eight leaf parameters."""
    params, off = {}, 0
    for name, shp in shapes(V, C, L, FF).items():
        n = math.prod(shp)
        params[name] = flat[off:off + n].clone().view(shp).requires_grad_(True)
        off += n
    assert off == flat.numel(), (off, flat.numel())
    return params


def rope_tables(T, hs, theta=10000.0):
    """cos, sin of pos * theta^(-2i/hs), each (T, hs/2), computed in float64."""
    i = torch.arange(hs // 2, dtype=torch.float64)
    freq = theta ** (-2.0 * i / hs)
    ang = torch.arange(T, dtype=torch.float64)[:, None] * freq[None, :]
    return ang.cos().float(), ang.sin().float()


def rope(x, cos, sin):
    """x (B,T,NH,hs): rotate the interleaved pairs (x[2i], x[2i+1])."""
    B, T, NH, hs = x.shape
    xr = x.view(B, T, NH, hs // 2, 2)
    x0, x1 = xr[..., 0], xr[..., 1]
    c, s = cos[None, :T, None, :], sin[None, :T, None, :]
    return torch.stack([x0 * c - x1 * s, x0 * s + x1 * c], dim=-1).view(
        B, T, NH, hs)


def rmsnorm(x, w, eps=1e-5):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def forward(P, tokens, NH, cos, sin):
    """tokens (B,T) int64 -> logits (B,T,V)."""
    B, T = tokens.shape
    wte = P["wte"]
    C = wte.shape[1]
    L = P["wqkv"].shape[0]
    FF = P["w2"].shape[2]
    hs = C // NH
    mask = torch.ones(T, T, dtype=torch.bool).triu(1)
    x = wte[tokens]
    for l in range(L):
        h = rmsnorm(x, P["rms_att"][l])
        q, k, v = (h @ P["wqkv"][l].t()).split(C, dim=-1)
        q = rope(q.view(B, T, NH, hs), cos, sin).transpose(1, 2)
        k = rope(k.view(B, T, NH, hs), cos, sin).transpose(1, 2)
        v = v.view(B, T, NH, hs).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(hs)
        att = att.masked_fill(mask, float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).reshape(B, T, C)
        x = x + y @ P["wo"][l].t()
        h = rmsnorm(x, P["rms_ffn"][l])
        g, u = (h @ P["w13"][l].t()).split(FF, dim=-1)
        x = x + (F.silu(g) * u) @ P["w2"][l].t()
    x = rmsnorm(x, P["rms_final"])
    return x @ wte.t()  # tied head


def lr_at(step, lr, warmup, total, final_frac, schedule):
    """policy/adamw.c's schedule, written again: linear warm-up, then cosine
    (schedule 0) or linear (1) decay to lr*final_frac at total."""
    if step < warmup:
        return lr * (step + 1) / warmup
    lr_min = lr * final_frac
    if step >= total:
        return lr_min
    f = (step - warmup) / (total - warmup)
    k = 1.0 - f if schedule == 1 else 0.5 * (1.0 + math.cos(math.pi * f))
    return lr_min + (lr - lr_min) * k


def make_adamw(P, lr, beta1, beta2, eps, wd):
    decay = [P[n] for n in NAMES if n in DECAYS]
    other = [P[n] for n in NAMES if n not in DECAYS]
    return torch.optim.AdamW(
        [{"params": decay, "weight_decay": wd},
         {"params": other, "weight_decay": 0.0}],
        lr=lr, betas=(beta1, beta2), eps=eps)
