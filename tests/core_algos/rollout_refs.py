"""Float64 references for rollout correction, one row and one token at a time in plain Python numbers, written from
the formulas in verl.core_algos.rollout_correction's docstrings (and docs/rollout.md), never from its code."""

from __future__ import annotations

import math
import statistics

import torch

BOUND = 20.0  # log-space safety bound of every ratio


def bexp(x: float) -> float:
    return math.exp(min(max(x, -BOUND), BOUND))


def clamp(x: float, lo: float, hi: float) -> float:
    return min(max(x, lo), hi)


def log_ratio_rows(old, rollout, m) -> list[list[tuple[int, float]]]:
    """Per row, (position, log pi_old - log pi_rollout) of its response tokens."""
    return [[(t, float(old[i][t]) - float(rollout[i][t])) for t in range(len(m[i])) if m[i][t]] for i in range(len(m))]


def mismatch_inputs(seed: int = 0, bs: int = 6, length: int = 9, lengths=(9, 4, 7, 1, 0, 6), scale: float = 0.3):
    """(old, rollout, mask) float64: log-probs < 0, a row without tokens, padding filled with NaN / -inf garbage."""
    g = torch.Generator().manual_seed(seed)
    old = -torch.rand(bs, length, generator=g, dtype=torch.float64) * 3.0 - 0.05
    rollout = old + torch.randn(bs, length, generator=g, dtype=torch.float64) * scale
    m = torch.tensor([[1.0 if t < n else 0.0 for t in range(length)] for n in lengths], dtype=torch.float64)
    old = torch.where(m.bool(), old, torch.full_like(old, float("nan")))
    rollout = torch.where(m.bool(), rollout, torch.full_like(rollout, float("-inf")))
    return old, rollout, m


def ref_is(old, rollout, m, level: str, cap: float, normalize: bool = False):
    """(weights as nested lists, metrics dict) of the truncated importance weights."""
    rows = log_ratio_rows(old, rollout, m)
    bs, length = len(m), len(m[0])
    raw = [[0.0] * length for _ in range(bs)]
    row_logs: dict[int, float] = {}
    for i, toks in enumerate(rows):
        if level == "token":
            for t, lr in toks:
                raw[i][t] = bexp(lr)
            continue
        total = sum(lr for _, lr in toks)
        row_logs[i] = total if level == "sequence" else (total / len(toks) if toks else 0.0)
        for t, _ in toks:
            raw[i][t] = bexp(row_logs[i])
    valid = [i for i in range(bs) if rows[i]]
    tokens = [raw[i][t] for i in range(bs) for t, _ in rows[i]]
    lo = 1.0 / cap
    metrics = {"rollout_is_mean": sum(tokens) / len(tokens)}
    if level == "token":
        metrics["rollout_is_max"], metrics["rollout_is_min"] = max(tokens), min(tokens)
        metrics["rollout_is_ratio_fraction_high"] = sum(w > cap for w in tokens) / len(tokens)
        metrics["rollout_is_ratio_fraction_low"] = sum(w < lo for w in tokens) / len(tokens)
    else:
        logs = [row_logs[i] for i in valid]
        metrics["rollout_is_max"] = math.exp(min(max(logs), BOUND))
        metrics["rollout_is_min"] = math.exp(min(logs))
        metrics["rollout_is_ratio_fraction_high"] = sum(x > math.log(cap) for x in logs) / len(logs)
        metrics["rollout_is_ratio_fraction_low"] = sum(x < math.log(lo) for x in logs) / len(logs)
    c = [clamp(w, lo, cap) for w in tokens]
    mean_c = sum(c) / len(c)
    metrics["rollout_is_std"] = math.sqrt(max(sum(x * x for x in c) / len(c) - mean_c**2, 0.0))
    metrics["rollout_is_eff_sample_size"] = 1.0 / (sum((x / (mean_c + 1e-8)) ** 2 for x in c) / len(c))
    seq = [sum(raw[i][t] for t, _ in rows[i]) / len(rows[i]) for i in valid]
    metrics.update(
        rollout_is_seq_mean=sum(seq) / len(seq),
        rollout_is_seq_std=statistics.stdev(seq) if len(seq) > 1 else 0.0,
        rollout_is_seq_max=max(seq),
        rollout_is_seq_min=min(seq),
        rollout_is_seq_max_deviation=max(abs(s - 1.0) for s in seq),
        rollout_is_seq_fraction_high=sum(s > cap for s in seq) / len(seq),
        rollout_is_seq_fraction_low=sum(s < lo for s in seq) / len(seq),
    )
    weights = [[min(w, cap) for w in row] for row in raw]
    if normalize:
        if level == "token":
            mean = sum(weights[i][t] for i in range(bs) for t, _ in rows[i]) / len(tokens)
        else:
            mean = sum(sum(weights[i][t] for t, _ in rows[i]) / len(rows[i]) for i in valid) / len(valid)
        weights = [[w / mean for w in row] for row in weights]
        metrics["rollout_is_batch_norm_factor"] = mean
    return weights, metrics


def divergence(estimator: str, lr: float) -> float:
    lr = clamp(lr, -BOUND, BOUND)
    if estimator == "k1":
        return -lr
    if estimator == "k2":
        return 0.5 * lr * lr
    return math.exp(lr) - 1.0 - lr


def ref_keep(old, rollout, m, option: str, lower: float | None, upper: float) -> list[list[bool]]:
    """Which response tokens one rejection option keeps (padding: True, it is not tested)."""
    level, _, estimator = option.rpartition("_")
    rows = log_ratio_rows(old, rollout, m)

    def passes(value: float) -> bool:
        if lower is not None:
            return math.log(lower) <= value <= math.log(upper)
        return value <= upper

    keep = [[True] * len(m[0]) for _ in range(len(m))]
    for i, toks in enumerate(rows):
        values = [divergence(estimator, lr) for _, lr in toks]
        if level == "token":
            for (t, _), v in zip(toks, values):
                keep[i][t] = passes(v)
            continue
        if not toks:
            continue
        agg = {"seq_sum": sum(values), "seq_mean": sum(values) / len(values), "seq_max": max(values)}[level]
        for t, _ in toks:
            keep[i][t] = passes(agg)
    return keep


def ref_offpolicy(old, rollout, m) -> dict[str, float]:
    rows = [i for i in range(len(m)) if any(m[i])]
    tok = lambda x, i: [float(x[i][t]) for t in range(len(m[i])) if m[i][t]]  # noqa: E731
    lp_old = [sum(tok(old, i)) / len(tok(old, i)) for i in rows]
    lp_roll = [sum(tok(rollout, i)) / len(tok(rollout, i)) for i in rows]
    lrs = [lr for i in rows for _, lr in log_ratio_rows(old, rollout, m)[i]]
    diff = [r - o for r, o in zip(lp_roll, lp_old)]
    seq_lr = [sum(lr for _, lr in log_ratio_rows(old, rollout, m)[i]) for i in rows]
    n = len(rows)
    return {
        "training_ppl": sum(math.exp(-x) for x in lp_old) / n,
        "training_log_ppl": sum(-x for x in lp_old) / n,
        "rollout_ppl": sum(math.exp(-x) for x in lp_roll) / n,
        "rollout_log_ppl": sum(-x for x in lp_roll) / n,
        "kl": sum(-x for x in lrs) / len(lrs),
        "k3_kl": sum(divergence("k3", x) for x in lrs) / len(lrs),
        "log_ppl_diff": sum(diff) / n,
        "log_ppl_abs_diff": sum(abs(x) for x in diff) / n,
        "log_ppl_diff_max": max(diff),
        "log_ppl_diff_min": min(diff),
        "ppl_ratio": sum(bexp(x) for x in diff) / n,
        "chi2_token": sum(bexp(x) ** 2 for x in lrs) / len(lrs) - 1.0,
        "chi2_seq": sum(math.exp(2.0 * clamp(x, -BOUND, BOUND)) for x in seq_lr) / n - 1.0,
    }


def ref_mismatch(old, rollout, m) -> dict[str, float]:
    p = [math.exp(float(old[i][t])) for i in range(len(m)) for t in range(len(m[i])) if m[i][t]]
    q = [math.exp(float(rollout[i][t])) for i in range(len(m)) for t in range(len(m[i])) if m[i][t]]
    d = [abs(a - b) for a, b in zip(p, q)]
    mp, mq = sum(p) / len(p), sum(q) / len(q)
    cov = sum((a - mp) * (b - mq) for a, b in zip(p, q))
    sp, sq = math.sqrt(sum((a - mp) ** 2 for a in p)), math.sqrt(sum((b - mq) ** 2 for b in q))
    return {
        "training/rollout_probs_diff_valid": 1,
        "training/rollout_probs_diff_max": max(d),
        "training/rollout_probs_diff_mean": sum(d) / len(d),
        "training/rollout_probs_diff_std": statistics.stdev(d),
        "training/rollout_actor_probs_pearson_corr": cov / (sp * sq),
    }
