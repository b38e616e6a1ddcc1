"""The rollout-correction stage of a step: right after the old log-probs, compare them with the sampler's
(``rollout_log_probs``), log the mismatch and, when ``algorithm.rollout_correction`` asks, add importance weights
(``rollout_is_weights``, read by the actor's policy loss) and take rejected tokens out of ``response_mask`` (so out
of the advantages' statistics, the critic's loss and the actor's loss). docs/rollout.md has the keys, formulas and
metric names.

The mismatch metrics (``training/rollout_probs_diff_*``, ``training/rollout_actor_probs_pearson_corr`` and the
``rollout_corr/`` off-policy ones) are cheap and logged every step the sampler returned its log-probs. When the
trainer skipped the old-log-prob pass (one epoch over one mini-batch: the update's own pre-step log-probs are the
old ones), the actor returns those log-probs with its update and the same metrics come from them
(``mismatch_metrics_after_update``); a correction turns the skip off, since its weights are needed before the update.

Bypass mode (``bypass_mode=true``, verl's) skips the pass instead: the sampler's log-probs become ``old_log_probs``
(``bypass_old_log_probs``), this stage has nothing to compare, and the actor's loss (``loss_mode=bypass_mode``,
`verl.core_algos.policy_loss_bypass`) measures the weights and rejection against the policy being trained;
``configure_bypass_mode`` sets that loss up before the workers are built.
"""

from __future__ import annotations

from typing import Any

import torch

from verl.core_algos.rollout_correction_metrics import compute_mismatch_metrics
from verl.protocol import DataProto
from verl.trainer.ppo.rollout_corr_helper import (
    compute_rollout_corr_metrics_from_logprobs,
    compute_rollout_correction_and_add_to_batch,
)

__all__ = [
    "apply_rollout_correction",
    "bypass_old_log_probs",
    "configure_bypass_mode",
    "corrects",
    "mismatch_metrics",
    "mismatch_metrics_after_update",
]

_NO_ROLLOUT_LOG_PROBS = (
    "algorithm.rollout_correction.{key}={value!r} needs the sampler's log-probs of its tokens, but the batch has no "
    "'rollout_log_probs': set actor_rollout_ref.rollout.calculate_log_probs=true (and use a rollout that returns them)"
)


def configure_bypass_mode(config: Any) -> Any:
    """The config to run with: with ``algorithm.rollout_correction.bypass_mode``, a copy whose actor points at the
    bypass loss (``policy_loss.loss_mode`` is ``bypass_mode`` and ``policy_loss.rollout_correction`` a copy of the
    section: what verl's trainer does at each step, here once, before the workers read the config); else ``config``
    itself. ``config``: the job's loaded ``PPOTrainerConfig`` (checked first: ``check_bypass_mode``)."""
    from verl.utils.config import replace_keys, to_container

    rc = config.algorithm.rollout_correction
    if not rc.bypass_mode:
        return config
    policy_loss = "actor_rollout_ref.actor.policy_loss"
    return replace_keys(
        config, {f"{policy_loss}.loss_mode": "bypass_mode", f"{policy_loss}.rollout_correction": to_container(rc)}
    )


def bypass_old_log_probs(batch: DataProto) -> DataProto:
    """Bypass mode's old log-probs: the sampler's (``rollout_log_probs``), copied into ``old_log_probs``. A batch
    without them is a ValueError naming the key to set."""
    if "rollout_log_probs" not in batch.batch:
        raise ValueError(_NO_ROLLOUT_LOG_PROBS.format(key="bypass_mode", value=True))
    batch.batch["old_log_probs"] = batch.batch["rollout_log_probs"].clone()
    return batch


def corrects(rollout_correction: Any) -> bool:
    """Whether ``algorithm.rollout_correction`` changes the update (importance weights or rejection), not only
    measures."""
    return rollout_correction.rollout_is is not None or rollout_correction.rollout_rs is not None


def mismatch_metrics(old_log_probs: torch.Tensor, rollout_log_probs: torch.Tensor, response_mask: torch.Tensor) -> dict:
    """The mismatch of the trainer's and the sampler's log-probs (bs, T) over ``response_mask``: the ``training/``
    probability metrics and the ``rollout_corr/`` off-policy ones."""
    return {
        **compute_mismatch_metrics(old_log_probs, rollout_log_probs, response_mask),
        **compute_rollout_corr_metrics_from_logprobs(old_log_probs, rollout_log_probs, response_mask),
    }


def apply_rollout_correction(batch: DataProto, rollout_correction: Any) -> tuple[DataProto, dict[str, float]]:
    """The stage: the batch (with ``rollout_is_weights`` and a rejected-out ``response_mask`` when configured) and
    the step's mismatch and ``rollout_corr/`` metrics, all measured before rejection. ``rollout_correction``:
    ``algorithm.rollout_correction``. A correction without the sampler's log-probs is a ValueError naming the key to
    set."""
    b = batch.batch
    if rollout_correction.bypass_mode:  # old_log_probs are the sampler's: the loss measures the mismatch itself
        return batch, {}
    if not corrects(rollout_correction):
        if "old_log_probs" not in b or "rollout_log_probs" not in b:
            return batch, {}
        return batch, mismatch_metrics(b["old_log_probs"], b["rollout_log_probs"], b["response_mask"])
    if "rollout_log_probs" not in b:
        key = "rollout_is" if rollout_correction.rollout_is is not None else "rollout_rs"
        raise ValueError(_NO_ROLLOUT_LOG_PROBS.format(key=key, value=rollout_correction[key]))
    if "old_log_probs" not in b:
        raise ValueError("rollout correction weighs by old_log_probs: the trainer computes them before this stage")
    metrics = compute_mismatch_metrics(b["old_log_probs"], b["rollout_log_probs"], b["response_mask"])
    batch, correction_metrics = compute_rollout_correction_and_add_to_batch(batch, rollout_correction)
    return batch, {**metrics, **correction_metrics}


def mismatch_metrics_after_update(batch: DataProto, update_output: DataProto) -> dict[str, float]:
    """The mismatch metrics of a step whose old log-probs came from the on-policy update itself, which returns them
    (``old_log_probs``, in the batch's row order); empty when it did not or the sampler gave no log-probs."""
    b = batch.batch
    if update_output.batch is None or "old_log_probs" not in update_output.batch or "rollout_log_probs" not in b:
        return {}
    return mismatch_metrics(update_output.batch["old_log_probs"], b["rollout_log_probs"], b["response_mask"])
