"""Float64 reference loops and inputs shared by the tests of verl.core_algos: one batch row and one token at a time,
in plain Python numbers, written from the formulas in the docstrings (never from the code under test)."""

from __future__ import annotations

import math

import torch

BS, T = 8, 7
LENGTHS = [7, 5, 3, 1, 6, 7, 2, 4]  # trailing padding after each length
UIDS = ["a", "b", "a", "c", "b", "a", "c", "b"]  # groups interleaved, sizes 3/3/2


def gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def mask(lengths=LENGTHS, length: int = T) -> torch.Tensor:
    return torch.tensor([[1.0 if t < n else 0.0 for t in range(length)] for n in lengths], dtype=torch.float64)


def randn(*shape, seed: int = 0, scale: float = 1.0) -> torch.Tensor:
    return torch.randn(*shape, generator=gen(seed), dtype=torch.float64) * scale


def close(actual, expected, tol: float = 1e-9) -> None:
    expected = torch.as_tensor(expected, dtype=torch.float64)
    actual = torch.as_tensor(actual, dtype=torch.float64)
    assert torch.allclose(actual, expected, atol=tol, rtol=tol), (actual, expected)


def pg_inputs(seed: int = 30, lengths=LENGTHS, length: int = T):
    """(old_log_prob, log_prob, advantages, mask): log-probs < 0 with ratios spread well past 1 +- 0.2."""
    m = mask(lengths, length)
    bs = len(lengths)
    old = -randn(bs, length, seed=seed, scale=0.5).abs() - 0.3
    lp = torch.clamp(old + randn(bs, length, seed=seed + 1, scale=0.4), max=-1e-3)
    adv = randn(bs, length, seed=seed + 2)
    return old, lp, adv, m


def ref_agg(loss, m, mode: str, scale_factor: float | None = None) -> float:
    """agg_loss in loops: rows without a token are left out of the sequence means."""
    sums, counts = [], []
    for i in range(len(loss)):
        valid = [t for t in range(len(loss[i])) if m[i][t]]
        sums.append(sum(float(loss[i][t]) for t in valid))
        counts.append(len(valid))
    kept = [i for i in range(len(loss)) if counts[i] > 0]
    if mode == "token-mean":
        return sum(sums) / sum(counts)
    if mode == "token-sum":
        return sum(sums)
    if mode == "seq-mean-token-sum":
        return sum(sums[i] for i in kept) / len(kept)
    if mode == "seq-mean-token-mean":
        return sum(sums[i] / counts[i] for i in kept) / len(kept)
    if mode == "seq-mean-token-sum-norm":
        horizon = len(loss[0]) if scale_factor is None else scale_factor
        return sum(sums[i] for i in kept) / len(kept) / horizon
    raise AssertionError(mode)


def ref_groups(index) -> dict:
    groups: dict = {}
    for i, uid in enumerate(index):
        groups.setdefault(uid, []).append(i)
    return groups


def ref_whiten(x, m) -> list[list[float]]:
    """(x - mean) / sqrt(var + 1e-8), unbiased variance over the valid entries; 0 on padding."""
    vals = [float(x[i][t]) for i in range(len(x)) for t in range(len(x[i])) if m[i][t]]
    mean = sum(vals) / len(vals)
    var = sum((v - mean) ** 2 for v in vals) / (len(vals) - 1)
    return [
        [(float(x[i][t]) - mean) / math.sqrt(var + 1e-8) if m[i][t] else 0.0 for t in range(len(x[i]))]
        for i in range(len(x))
    ]


def ref_grpo_scalars(scores, index, eps: float = 1e-6, norm: bool = True) -> list[float]:
    out = [0.0] * len(scores)
    for members in ref_groups(index).values():
        n = len(members)
        mean = sum(scores[j] for j in members) / n if n > 1 else 0.0
        std = math.sqrt(sum((scores[j] - mean) ** 2 for j in members) / (n - 1)) if n > 1 else 1.0
        for j in members:
            out[j] = (scores[j] - mean) / (std + eps) if norm else scores[j] - mean
    return out


def broadcast(per_seq, m) -> list[list[float]]:
    return [[per_seq[i] if m[i][t] else 0.0 for t in range(len(m[i]))] for i in range(len(m))]


def actor(**keys):
    """The typed actor section the policy losses read (the worker passes its own): ``keys`` over the schema's
    defaults, converted as verl's path converts a dict (``verl.utils.config.as_section``)."""
    from verl.utils.config import as_section
    from verl.workers.config.actor import ActorConfig

    return as_section(keys, ActorConfig)


def algorithm(**keys):
    """The typed ``algorithm`` section the estimators read: ``keys`` over the schema's defaults."""
    from verl.trainer.config.algorithm import AlgoConfig
    from verl.utils.config import as_section

    return as_section(keys, AlgoConfig)
