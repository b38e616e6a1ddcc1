"""verl's module for rollout correction (``from verl.trainer.ppo.rollout_corr_helper import ...``): importance weights
and rejection sampling against the train/inference mismatch, with verl's function names and return types.

The math lives in the leaf package (``verl.core_algos.rollout_correction``, ``rollout_correction_metrics``,
``rollout_ratios``; docs/rollout.md); this module adds what needs a `DataProto` or the config: the weights wrapped as
a batch, the step's batch updated in place. The trainer's stage is ``verl.trainer.ppo.rollout_correction``.
"""

from __future__ import annotations

from typing import Any

import torch

from verl.core_algos.rollout_correction import (
    ROLLOUT_IS_LEVELS,
    SUPPORTED_ROLLOUT_RS_OPTIONS,
    TOKEN_LEVEL_ROLLOUT_RS_OPTIONS,
    compute_rollout_correction,
    compute_rollout_correction_weights,
    compute_rollout_rejection_mask,
)
from verl.core_algos.rollout_correction_metrics import (
    compute_is_metrics,
    compute_mismatch_metrics,
    compute_offpolicy_metrics,
    compute_rs_metrics,
)
from verl.core_algos.rollout_ratios import SAFETY_BOUND
from verl.protocol import DataProto

__all__ = [
    "ROLLOUT_IS_LEVELS",
    "SAFETY_BOUND",
    "SUPPORTED_ROLLOUT_RS_OPTIONS",
    "TOKEN_LEVEL_ROLLOUT_RS_OPTIONS",
    "compute_is_metrics",
    "compute_mismatch_metrics",
    "compute_offpolicy_metrics",
    "compute_rollout_corr_metrics_from_logprobs",
    "compute_rollout_correction_and_add_to_batch",
    "compute_rollout_correction_and_rejection_mask",
    "compute_rollout_correction_weights",
    "compute_rollout_rejection_mask",
    "compute_rs_metrics",
]


def compute_rollout_correction_and_rejection_mask(
    old_log_prob: torch.Tensor,
    rollout_log_prob: torch.Tensor,
    response_mask: torch.Tensor,
    rollout_is: str | None = None,
    rollout_is_threshold: float | None = 2.0,
    rollout_is_batch_normalize: bool = False,
    rollout_rs: str | None = None,
    rollout_rs_threshold: str | float | None = None,
) -> tuple[DataProto | None, torch.Tensor, dict[str, float]]:
    """verl's call: (``DataProto`` with ``rollout_is_weights`` (bs, T), or None without ``rollout_is``; the response
    mask after rejection; ``rollout_corr/`` metrics). A ``rollout_is`` without a threshold computes no weights, as
    in verl. See ``verl.core_algos.rollout_correction.compute_rollout_correction``."""
    level = rollout_is if rollout_is_threshold is not None else None
    weights, mask, metrics = compute_rollout_correction(
        old_log_prob,
        rollout_log_prob,
        response_mask,
        rollout_is=level,
        rollout_is_threshold=rollout_is_threshold if level is not None else 2.0,
        rollout_is_batch_normalize=rollout_is_batch_normalize,
        rollout_rs=rollout_rs,
        rollout_rs_threshold=rollout_rs_threshold,
    )
    proto = None if weights is None else DataProto.from_dict(tensors={"rollout_is_weights": weights})
    return proto, mask, metrics


def compute_rollout_correction_and_add_to_batch(batch: DataProto, rollout_corr_config: Any) -> tuple[DataProto, dict]:
    """The correction on a step's batch (``old_log_probs``, ``rollout_log_probs``, ``response_mask``): the batch gets
    ``rollout_is_weights`` when ``rollout_is`` is set and a ``response_mask`` with the rejected tokens removed when
    ``rollout_rs`` is set (unchanged otherwise); returns it with the ``rollout_corr/`` metrics.
    ``rollout_corr_config``: ``algorithm.rollout_correction`` (dataclass, DictConfig or dict)."""
    get = rollout_corr_config.get
    b = batch.batch
    weights, mask, metrics = compute_rollout_correction(
        b["old_log_probs"],
        b["rollout_log_probs"],
        b["response_mask"],
        rollout_is=get("rollout_is", None),
        rollout_is_threshold=get("rollout_is_threshold", 2.0),
        rollout_is_batch_normalize=get("rollout_is_batch_normalize", False),
        rollout_rs=get("rollout_rs", None),
        rollout_rs_threshold=get("rollout_rs_threshold", None),
    )
    b["response_mask"] = mask
    if weights is not None:
        b["rollout_is_weights"] = weights
    return batch, metrics


def compute_rollout_corr_metrics_from_logprobs(
    log_prob: torch.Tensor, rollout_log_prob: torch.Tensor, response_mask: torch.Tensor
) -> dict[str, float]:
    """The off-policy metrics (``rollout_corr/kl``, ``k3_kl``, perplexities, chi^2) of ``log_prob`` against the
    sampler's ``rollout_log_prob``, (bs, T) each."""
    metrics = compute_offpolicy_metrics(log_prob, rollout_log_prob, response_mask)
    return {f"rollout_corr/{k}": v for k, v in metrics.items()}
