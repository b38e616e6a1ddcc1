"""Validation statistics over several responses per prompt, as verl reports them (``val-core/<source>/<var>/...``).

For every data source, every variable (the score, and each numeric field the reward function returns) and every
prompt with ``N`` responses:

    mean@N, std@N                     the mean and (population) std of the prompt's N values
    best@n/mean, best@n/std           bootstrap: draw n of the N values with replacement, keep the largest;
    worst@n/mean, worst@n/std         the mean and std of that over 1000 draws (smallest for worst@n)
    maj@n/mean, maj@n/std             bootstrap of majority voting: the value of the most frequent ``pred``
                                      among the n drawn (only when the reward function returns a ``pred``)

for n = 2, 4, 8, ... below N, and N itself. Each statistic is then averaged over the source's prompts. With a 0/1
score, best@n/mean estimates pass@n from N samples by resampling (Chen et al., 2021, "Evaluating Large Language
Models Trained on Code", define pass@k and an unbiased estimator of it; verl and this module report the bootstrap).

The draws use their own ``numpy.random.RandomState(seed)``: the numbers equal verl's for the same seed, and the
global numpy RNG, which the training loop's sampling uses, is left untouched.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

import numpy as np

__all__ = ["bootstrap_metric", "calc_maj_val", "process_validation_metrics"]

N_BOOTSTRAP = 1000


def bootstrap_metric(
    data: Sequence[Any],
    subset_size: int,
    reduce_fns: Sequence[Callable[[np.ndarray], float]],
    n_bootstrap: int = N_BOOTSTRAP,
    seed: int = 42,
) -> list[tuple[float, float]]:
    """``[(mean, std) of reduce_fn over n_bootstrap draws of subset_size items with replacement) per reduce_fn]``.

    All reduce functions see the same draws (index matrix of shape (n_bootstrap, subset_size))."""
    if len(data) == 0:
        raise ValueError("bootstrap_metric: data is empty; there is nothing to resample")
    if subset_size < 1:
        raise ValueError(f"bootstrap_metric: subset_size must be >= 1, got {subset_size}")
    items = np.empty(len(data), dtype=object)
    items[:] = list(data)  # element-wise, so dicts and tuples stay items rather than becoming array rows
    draws = np.random.RandomState(seed).choice(len(items), size=(n_bootstrap, subset_size), replace=True)
    out = []
    for fn in reduce_fns:
        values = np.array([fn(items[idx]) for idx in draws], dtype=np.float64)
        out.append((float(values.mean()), float(values.std())))
    return out


def calc_maj_val(data: Sequence[dict[str, Any]], vote_key: str, val_key: str) -> Any:
    """``val_key`` of the first item whose ``vote_key`` is the most frequent (ties: the vote seen first)."""
    votes = Counter(d[vote_key] for d in data)
    winner = max(votes, key=votes.get)  # max keeps the first of equal counts, in first-seen order
    return next(d[val_key] for d in data if d[vote_key] == winner)


def _subset_sizes(n: int) -> list[int]:
    """2, 4, 8, ... below ``n``, then ``n`` (none for a single response)."""
    if n <= 1:
        return []
    sizes, k = [], 2
    while k < n:
        sizes.append(k)
        k *= 2
    return sizes + [n]


def _prompt_stats(values: list[Any], preds: list[Any] | None, seed: int) -> dict[str, float]:
    n = len(values)
    stats = {f"mean@{n}": float(np.mean(values))}
    if n == 1:
        return stats
    stats[f"std@{n}"] = float(np.std(values))
    for k in _subset_sizes(n):
        (best_mean, best_std), (worst_mean, worst_std) = bootstrap_metric(values, k, [np.max, np.min], seed=seed)
        stats.update(
            {
                f"best@{k}/mean": best_mean,
                f"best@{k}/std": best_std,
                f"worst@{k}/mean": worst_mean,
                f"worst@{k}/std": worst_std,
            }
        )
        if preds is not None:
            votes = [{"val": v, "pred": p} for v, p in zip(values, preds, strict=True)]
            vote = partial(calc_maj_val, vote_key="pred", val_key="val")
            [(maj_mean, maj_std)] = bootstrap_metric(votes, k, [vote], seed=seed)
            stats[f"maj@{k}/mean"] = maj_mean
            stats[f"maj@{k}/std"] = maj_std
    return stats


def process_validation_metrics(
    data_sources: Sequence[str],
    sample_uids: Sequence[Any],
    infos_dict: dict[str, Sequence[Any]],
    seed: int = 42,
) -> dict[str, dict[str, dict[str, float]]]:
    """``{data_source: {variable: {statistic: value}}}`` (module docstring) from one entry per response:
    ``data_sources[i]``, ``sample_uids[i]`` (the prompt it answers) and ``infos_dict[variable][i]``.

    Text variables (such as ``pred`` itself) get no statistics; ``pred``, when present, drives ``maj@n``."""
    n = len(data_sources)
    if len(sample_uids) != n:
        raise ValueError(f"process_validation_metrics: {n} data_sources but {len(sample_uids)} sample_uids")
    for name, values in infos_dict.items():
        if len(values) != n:
            raise ValueError(f"process_validation_metrics: infos_dict[{name!r}] has {len(values)} values, not {n}")
    rows: dict[str, dict[Any, list[int]]] = defaultdict(lambda: defaultdict(list))
    for i, (source, uid) in enumerate(zip(data_sources, sample_uids)):
        rows[source][uid].append(i)
    out: dict[str, dict[str, dict[str, float]]] = {}
    for source, prompts in rows.items():
        per_var: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
        for idx in prompts.values():
            preds = [infos_dict["pred"][i] for i in idx] if "pred" in infos_dict else None
            for name, values in infos_dict.items():
                vals = [values[i] for i in idx]
                if not vals or isinstance(vals[0], str):
                    continue
                for stat, value in _prompt_stats(vals, preds, seed).items():
                    per_var[name][stat].append(value)
        out[source] = {name: {stat: float(np.mean(v)) for stat, v in stats.items()} for name, stats in per_var.items()}
    return out
