"""Small torch helpers shared by the trainers: seeding, learning-rate schedules, masked statistics, log-probs.

The masked statistics and ``entropy_from_logits`` are defined in the leaf package :mod:`verl.core_algos`
(``verl.core_algos.functional``) and re-exported here under the same names."""

from __future__ import annotations

import math
import random

import numpy as np
import torch

from verl.core_algos.functional import (  # noqa: F401 (re-exported)
    entropy_from_logits,
    masked_mean,
    masked_sum,
    masked_var,
    masked_whiten,
)


def set_seed(seed: int) -> None:
    """Seed Python, NumPy and torch. With the same seed, CPU runs give identical results."""
    random.seed(seed)
    np.random.seed(seed % (2**32))
    torch.manual_seed(seed)


def get_cosine_schedule_with_warmup(
    optimizer: torch.optim.Optimizer,
    num_warmup_steps: int,
    num_training_steps: int,
    min_lr_ratio: float = 0.0,
    num_cycles: float = 0.5,
) -> torch.optim.lr_scheduler.LambdaLR:
    """Linear warmup from 0 to lr over ``num_warmup_steps``, then cosine decay to ``lr * min_lr_ratio``.

    factor(t) = (t + 1) / (W + 1)                                              for t < W  (step 0 already moves)
              = min_lr_ratio + (1 - min_lr_ratio) * 0.5 * (1 + cos(2 pi c p))  with p = (t - W) / (T - W), c = 0.5
    """
    if not 0.0 <= min_lr_ratio <= 1.0:
        raise ValueError(f"min_lr_ratio must be in [0, 1], got {min_lr_ratio}")

    def factor(step: int) -> float:
        if step < num_warmup_steps:
            return float(step + 1) / float(max(1, num_warmup_steps + 1))
        progress = float(step - num_warmup_steps) / float(max(1, num_training_steps - num_warmup_steps))
        cosine = 0.5 * (1.0 + math.cos(math.pi * num_cycles * 2.0 * min(progress, 1.0)))
        return min_lr_ratio + (1.0 - min_lr_ratio) * cosine

    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


def get_constant_schedule_with_warmup(
    optimizer: torch.optim.Optimizer, num_warmup_steps: int
) -> torch.optim.lr_scheduler.LambdaLR:
    """Linear warmup over ``num_warmup_steps`` (factor (t + 1) / (W + 1), so step 0 already moves), then the
    constant lr."""
    return torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: min(1.0, float(step + 1) / float(max(1, num_warmup_steps + 1)))
    )


def logprobs_from_logits(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """log softmax(logits)[labels]: logits (bs, L, V), labels (bs, L) -> (bs, L), computed in float32."""
    return torch.log_softmax(logits.float(), dim=-1).gather(-1, labels.unsqueeze(-1)).squeeze(-1)


def logprobs_and_entropy_from_logits(
    logits: torch.Tensor, labels: torch.Tensor, calculate_entropy: bool = True, entropy_grad: bool = True
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """`logprobs_from_logits` and `entropy_from_logits` from one ``log_softmax`` (float32): one pass over the
    vocabulary instead of three. H = -sum_v p_v log p_v with p = exp(log p). Shapes (..., V), (...) -> (...), (...).
    ``entropy_grad=False`` computes the entropy outside the autograd graph (a metric only: no saved activations)."""
    logp = torch.log_softmax(logits.float(), dim=-1)
    token_logp = logp.gather(-1, labels.unsqueeze(-1)).squeeze(-1)
    if not calculate_entropy:
        return token_logp, None
    if entropy_grad:
        return token_logp, -(logp.exp() * logp).sum(dim=-1)
    with torch.no_grad():
        return token_logp, -(logp.exp() * logp).sum(dim=-1)
