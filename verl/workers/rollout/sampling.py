"""The sampler's randomness and filters: counter-based keyed uniforms, inverse-CDF draws, top-k/top-p filtering.

A draw is a pure function of its key -- ``(seed, call, sample_index, position)`` -- never of a generator's state or of
the batch the row sits in, which is what makes sampling independent of how rows are batched (`HFRollout`'s batch
path keys rows by their ``sample_index``; its per-request path by the request's number or its own ``seed``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import torch

__all__ = ["batch_sampling_params", "filter_logits", "keyed_uniform", "sample_inverse_cdf"]

_M32 = 0xFFFFFFFF


def _mix32(x: torch.Tensor) -> torch.Tensor:
    """A 32-bit integer hash (an offset, then two xorshift-multiply rounds) on int64 tensors holding values < 2**32; the multiplier
    is < 2**27, so no product overflows int64."""
    x = (x + 0x9E3779B9) & _M32  # the golden-ratio offset: 0 is not a fixed point
    x = (((x >> 16) ^ x) * 0x45D9F3B) & _M32
    x = (((x >> 16) ^ x) * 0x45D9F3B) & _M32
    return (x >> 16) ^ x


def keyed_uniform(seed: int | torch.Tensor, call: int, sample_index: torch.Tensor, position: int) -> torch.Tensor:
    """One float64 uniform in [0, 1) per row, a pure function of (seed, call, sample_index[row], position).

    Counter-based (no generator state), so a row's draw never depends on which other rows share its batch.
    Two independent 32-bit hashes give 48 bits of resolution. ``seed`` is one int for all rows or an int64 tensor
    of one non-negative seed per row (the same numbers as the int for a row holding that seed).
    """
    idx = sample_index.to(torch.int64)
    if isinstance(seed, torch.Tensor):
        seeds = seed.to(device=idx.device, dtype=torch.int64)
        h = _mix32(seeds & _M32)
        h = _mix32(h ^ ((seeds >> 32) & _M32))
    else:
        h = _mix32(torch.full_like(idx, int(seed) & _M32))
        h = _mix32(h ^ (int(seed) >> 32 & _M32))
    h = _mix32(h ^ (int(call) & _M32))
    h = _mix32(h ^ (idx & _M32))
    h = _mix32(h ^ ((idx >> 32) & _M32))
    h1 = _mix32(h ^ (int(position) & _M32))
    h2 = _mix32(h1 ^ 0x85EBCA6B)
    return ((h1 >> 8) * 2.0**24 + (h2 >> 8)).to(torch.float64) / 2.0**48


def sample_inverse_cdf(probs: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """Token ids (rows,) drawn from ``probs`` (rows, V) with uniforms ``u`` (rows,): the first index whose cumulative
    probability exceeds ``u * total``; a token of probability 0 is never drawn."""
    cdf = probs.to(torch.float64).cumsum(dim=-1)
    target = (u.to(cdf.device) * cdf[:, -1]).unsqueeze(-1)
    idx = torch.searchsorted(cdf, target, right=True).squeeze(-1)
    return idx.clamp(max=probs.shape[-1] - 1)


def filter_logits(logits: torch.Tensor, top_k: int = -1, top_p: float = 1.0) -> torch.Tensor:
    """Top-k then top-p (nucleus) filtering of ``logits`` (..., V): removed entries become ``-inf``.

    ``top_k <= 0`` or ``>= V`` is off. ``top_p >= 1`` is off; otherwise the smallest set of most likely tokens whose
    probability reaches ``top_p`` is kept, and the most likely token is always kept (so ``top_p`` tiny is greedy).
    """
    vocab = logits.shape[-1]
    if 0 < top_k < vocab:
        kth = torch.topk(logits, top_k, dim=-1).values[..., -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if top_p < 1.0:
        sorted_logits, sorted_idx = torch.sort(logits, dim=-1, descending=True)
        probs = sorted_logits.softmax(dim=-1)
        mass_before = probs.cumsum(dim=-1) - probs  # probability of the tokens ranked above each token
        remove_sorted = mass_before >= top_p
        remove_sorted[..., 0] = False
        remove = torch.zeros_like(remove_sorted).scatter(-1, sorted_idx, remove_sorted)
        logits = logits.masked_fill(remove, float("-inf"))
    return logits


def batch_sampling_params(
    cfg: Any, meta_info: Mapping, response_length_set: bool = True, engine: str = "rollout"
) -> dict[str, Any]:
    """The settings of one batch call (``do_sample``, ``temperature``, ``top_p``, ``top_k``, ``response_length``):
    the rollout config's, ``val_kwargs`` when ``meta_info["validate"]``, then any given in ``meta_info``; temperature
    0 means greedy (as in vLLM), and greedy decoding scores at temperature 1. Every engine's batch call uses this
    rule; ``engine`` names the caller in errors."""
    params = {
        "do_sample": cfg.do_sample,
        "temperature": cfg.temperature,
        "top_p": cfg.top_p,
        "top_k": cfg.top_k,
        "response_length": cfg.response_length if response_length_set else None,
    }
    if meta_info.get("validate", False):
        val = cfg.val_kwargs
        params.update(do_sample=val.do_sample, temperature=val.temperature, top_p=val.top_p, top_k=val.top_k)
    for key in ("do_sample", "temperature", "top_p", "top_k", "response_length"):
        if meta_info.get(key) is not None:
            params[key] = meta_info[key]
    if params["response_length"] is None:
        raise ValueError(f"{engine}: set rollout.response_length (max new tokens) or pass it in meta_info")
    params["response_length"] = int(params["response_length"])
    if params["response_length"] < 1:
        raise ValueError(f"{engine}: response_length must be >= 1, got {params['response_length']}")
    params["do_sample"] = bool(params["do_sample"])
    params["temperature"] = float(params["temperature"])
    params["top_p"] = float(params["top_p"])
    params["top_k"] = int(params["top_k"])
    if not math.isfinite(params["temperature"]):
        raise ValueError(f"{engine}: temperature must be finite, got {params['temperature']}")
    if params["temperature"] <= 0.0:  # temperature 0 means greedy, as in vLLM
        params["do_sample"] = False
    if not params["do_sample"]:
        params["temperature"] = 1.0
    return params
