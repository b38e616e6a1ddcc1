"""verl's ``calculate_debug_metrics``: the probability mismatch of the sampled tokens between the sampler
(``rollout_log_probs``) and the trainer (``old_log_probs``), as ``training/rollout_probs_diff_*`` and
``training/rollout_actor_probs_pearson_corr`` (formulas in ``verl.core_algos.rollout_correction_metrics``). The
trainer logs them every step (``verl.trainer.ppo.rollout_correction``); this is the same computation on a batch."""

from __future__ import annotations

import torch

from verl.core_algos.rollout_correction_metrics import compute_mismatch_metrics
from verl.protocol import DataProto

__all__ = ["calculate_debug_metrics"]


def calculate_debug_metrics(data: DataProto) -> dict[str, float]:
    """The mismatch metrics of ``data``'s ``old_log_probs`` against its ``rollout_log_probs`` over the response tokens:
    ``response_mask``, else the response part of ``attention_mask``, else every position (as verl)."""
    b = data.batch
    rollout = b["rollout_log_probs"]
    if "response_mask" in b:
        mask = b["response_mask"]
    elif "attention_mask" in b:
        mask = b["attention_mask"][:, -rollout.shape[-1] :]
    else:
        mask = torch.ones_like(rollout)
    return compute_mismatch_metrics(b["old_log_probs"], rollout, mask)
