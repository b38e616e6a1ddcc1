"""The PPO actor: log-probs of responses under the policy, and the clipped policy-gradient update.

Knows models and tensors, not algorithms' dataflow: which loss and which advantages come from the config and the
batch. Data-parallel across processes comes from the worker that wraps it (FSDP); here it is one module.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import torch

from verl import core_algos
from verl.protocol import DataProto
from verl.utils.config import omega_conf_to_dataclass
from verl.utils.failpoints import failpoint
from verl.utils.forward import forward_signature
from verl.utils.fsdp_utils import all_reduce_max, all_reduce_sum, clip_grad_norm, dp_size
from verl.utils.remove_padding import (
    check_packing_support,
    pack_sequences,
    packed_response_logits,
    unpack_to_response,
)
from verl.utils.seqlen_balancing import get_reverse_idx, rearrange_micro_batches
from verl.utils.shared_prefix import shared_prefix_response_logits
from verl.utils.torch_dtypes import autocast_context as torch_autocast
from verl.utils.torch_functional import chunked_logprobs_and_entropy, logprobs_and_entropy_from_logits
from verl.workers.config import FSDPActorConfig, trust_region_enabled

logger = logging.getLogger(__name__)


def autocast_context(module: torch.nn.Module, dtype_name: str | None):
    """``torch.autocast`` on the module's device for ``bf16``/``fp16`` (fp32 master weights stay); fp32/None: off.
    Warns once on a CPU that only emulates the dtype (`verl.utils.torch_dtypes`)."""
    device = next(module.parameters()).device.type
    return torch_autocast(device, dtype_name, key="actor_rollout_ref.actor.autocast_dtype")


def _scoring_temperature(data: DataProto) -> float:
    """``meta_info["temperature"]`` (default 1), which log-probs divide the logits by: it must be > 0."""
    temperature = float(data.meta_info.get("temperature", 1.0))
    if not temperature > 0:
        raise ValueError(
            f"log-probs at temperature {temperature}: it must be > 0 (greedy rollouts with rollout.temperature=0 "
            "are scored at temperature 1)"
        )
    return temperature


def forward_response_logits(module, micro: dict[str, torch.Tensor], response_length: int, temperature: float):
    """Logits that predict each response token: positions [-R-1, -1) of the full sequence, divided by temperature."""
    kwargs = {"logits_to_keep": response_length + 1} if forward_signature(module)[1] else {}
    out = module(
        input_ids=micro["input_ids"],
        attention_mask=micro["attention_mask"],
        position_ids=micro["position_ids"],
        use_cache=False,
        **kwargs,  # the lm_head runs on the response positions only
    )
    logits = out.logits[:, -response_length - 1 : -1, :].float()
    return logits / temperature if temperature != 1.0 else logits


# Per-token rates and constants: averaged over the mini-batch's tokens whatever loss_agg_mode is (the loss terms
# -- pg_loss, kl_loss, entropy -- are aggregated as the loss is).
TOKEN_MEAN_METRICS = frozenset(
    {
        "actor/pg_clipfrac",
        "actor/pg_clipfrac_lower",
        "actor/ppo_kl",
        "actor/kl_coef",
        "critic/vf_clipfrac",
        "critic/vpred_mean",
    }
)


def mini_batch_means(weighted_sums: dict[str, float]) -> dict[str, float]:
    """Per-mini-batch metrics from micro-batch values summed with their weights (`micro_batch_loss_weight`: the
    loss's for loss terms, token-mean's for `TOKEN_MEAN_METRICS`), over all ranks: exactly what the whole
    mini-batch would give in one pass, on any number of workers and micro-batch sizes."""
    keys = sorted(weighted_sums)
    totals = all_reduce_sum(torch.tensor([weighted_sums[k] for k in keys], dtype=torch.float64)) / dp_size()
    return dict(zip(keys, totals.tolist()))


def split_into_micro_batches(data: DataProto, micro_batch_size: int) -> list[DataProto]:
    return data.split(max(1, int(micro_batch_size)))


def make_micro_batches(
    data: DataProto,
    micro_batch_size: int,
    use_dynamic_bsz: bool = False,
    max_token_len: int | None = None,
    keep_prompts_together: bool = False,
) -> tuple[list[DataProto], list[list[int]] | None]:
    """Fixed-size micro-batches of ``micro_batch_size`` rows, or (``use_dynamic_bsz``) token-budget micro-batches of
    at most ``max_token_len`` real tokens each, with their row indices (None for fixed-size ones: batch order).
    ``keep_prompts_together``: token-budget micro-batches keep a prompt's rows together (``use_shared_prefix``)."""
    if use_dynamic_bsz:
        if not max_token_len:
            raise ValueError("use_dynamic_bsz needs a max token length (ppo/log_prob_max_token_len_per_gpu)")
        micros, groups = rearrange_micro_batches(data, max_token_len, keep_prompts_together=keep_prompts_together)
        # FSDP ranks must run the same number of forward/backward passes: every rank takes the largest count
        count = all_reduce_max(len(micros))
        if count > len(micros):
            micros, groups = rearrange_micro_batches(
                data, max_token_len, min_micro_batches=count, keep_prompts_together=keep_prompts_together
            )
        return micros, groups
    return split_into_micro_batches(data, micro_batch_size), None


def _is_weights_from_batch(batch: Any, old_log_prob: torch.Tensor) -> torch.Tensor:
    """The trainer's rollout-correction weights (``algorithm.rollout_correction.rollout_is``), as the batch has them."""
    return batch["rollout_is_weights"]


def _truncated_is_weights(batch: Any, old_log_prob: torch.Tensor, cap: float) -> torch.Tensor | None:
    """The actor's own truncated weights (``tis_imp_ratio_cap``); None (no correction) with ``cap <= 0``, where the
    update does not select the sampler's log-probs."""
    rollout_log_probs = batch["rollout_log_probs"] if "rollout_log_probs" in batch else None
    return core_algos.truncated_is_weights(old_log_prob, rollout_log_probs, cap)


@dataclass(frozen=True)
class _UpdatePlan:
    """What one ``update_policy`` call does, decided from the config and the batch before its loop over
    mini-batches, so the loop and the micro-batch step only follow it."""

    temperature: float  # the logits' divisor for the log-probs (the rollout's sampling temperature)
    on_policy: bool  # no old_log_probs: the current log-probs, detached, stand in for them
    mini_bsz: int  # rows per optimizer step on this rank
    micro_batches: Callable[[DataProto], tuple[list[DataProto], list[list[int]] | None]]  # fixed-size or token-budget
    policy_loss_fn: Callable[..., tuple[torch.Tensor, dict[str, Any]]]  # policy_loss.loss_mode's
    agg_mode: str  # how every loss term, and each micro-batch's weight, aggregates tokens
    rollout_is_weights: Callable[[Any, torch.Tensor], torch.Tensor | None]  # per-token weights of the policy loss
    entropy_in_loss: bool  # entropy_coeff != 0: the entropy is a loss term (with its gradient), not only a metric
    entropy_every_step: bool  # every mini-batch measures the entropy
    entropy_first_step: bool  # the first mini-batch measures it (bypass mode: the sampling policy's entropy)
    kl_in_loss: bool  # use_kl_loss: the KL to the reference policy is a loss term
    region: Any  # actor.trust_region when it steers the step size; None: the drift is only measured

    def measures_entropy(self, step: int) -> bool:
        """Whether optimizer step ``step`` (0-based, over all epochs) measures the entropy."""
        return self.entropy_every_step or (self.entropy_first_step and step == 0)


@dataclass
class _MiniBatchResult:
    """What one mini-batch's micro-batches leave besides their gradients."""

    groups: list[list[int]] | None  # token-budget micro-batches' row indices (None: consecutive rows)
    # metric values summed with their micro-batch weights (`mini_batch_means` turns them into the mini-batch's)
    weighted: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    # off-policy: KL(pi_old || pi_theta) as its k3 sum and token count, summed over ranks before it is read
    drift: torch.Tensor = field(default_factory=lambda: torch.zeros(2, dtype=torch.float64))
    log_probs: list[torch.Tensor] = field(default_factory=list)  # on-policy: each micro-batch's, before the step


class DataParallelPPOActor:
    """``compute_log_prob`` (with entropy) and ``update_policy`` over an HF causal LM.

    ``config``: the actor section (``FSDPActorConfig``, or a mapping of its keys). ``use_remove_padding`` and
    ``use_shared_prefix`` choose the forward pass; off here means the plain padded pass (the reference the fast
    paths are tested against), and the worker passes ``actor_rollout_ref.model``'s settings (on by default)."""

    def __init__(
        self,
        config: FSDPActorConfig | Any,
        actor_module: torch.nn.Module,
        actor_optimizer: torch.optim.Optimizer | None = None,
        use_remove_padding: bool = False,
        pad_token_id: int = 0,
        use_shared_prefix: bool = False,
    ):
        self.config: FSDPActorConfig = omega_conf_to_dataclass(config, FSDPActorConfig)
        self.actor_module = actor_module
        self._warned_agg_mode = False
        # (bs, R) log-probs before the last update when it was on-policy (no old_log_probs given), else None
        self.on_policy_log_probs: torch.Tensor | None = None
        self.actor_optimizer = actor_optimizer
        # actor.trust_region's multiplier of the scheduled learning rate (checkpointed by the worker)
        region = self.config.trust_region
        self.trust_region_on = trust_region_enabled(self.config)
        self.lr_scale = region.initial_lr_ratio if self.trust_region_on and region.adapt_lr else 1.0
        self.use_remove_padding = bool(use_remove_padding)
        self.use_shared_prefix = bool(use_shared_prefix)
        # verl's key: log-probs and entropy 1,024 tokens at a time, recomputed in the backward (a fraction of the
        # vocabulary-wide float32 memory; values equal to float rounding)
        self.chunked_logprobs = bool(getattr(self.config, "entropy_from_logits_with_chunking", False))
        self.pad_token_id = int(pad_token_id)
        if self.use_remove_padding:
            check_packing_support()

    def _forward_micro(
        self, b: dict[str, torch.Tensor], temperature: float, calculate_entropy: bool, entropy_grad: bool = False
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Log-probs (bs, R) of ``responses`` and entropies (bs, R) from one forward pass and one log-softmax.

        Each distinct prompt once (``use_shared_prefix``, where prompts repeat), else packed (``use_remove_padding``),
        else padded (plain); under ``autocast_dtype`` when set. The entropy carries a
        gradient only with ``entropy_grad``."""
        r = b["responses"]
        with autocast_context(self.actor_module, self.config.autocast_dtype):
            flat = None  # (logits (T, V), index with rows/cols/labels) of real response tokens only
            if self.use_shared_prefix:
                flat = shared_prefix_response_logits(self.actor_module, b, r.shape[1], temperature)
            if flat is None and self.use_remove_padding:
                packed = pack_sequences(b["input_ids"], b["attention_mask"], r.shape[1], self.pad_token_id)
                flat = packed_response_logits(self.actor_module, packed, temperature), packed
            if flat is None:
                logits, labels = forward_response_logits(self.actor_module, b, r.shape[1], temperature), r
            else:
                logits, index = flat
                labels = index.labels
        with torch.autocast(device_type=logits.device.type, enabled=False):
            logprobs_fn = chunked_logprobs_and_entropy if self.chunked_logprobs else logprobs_and_entropy_from_logits
            log_prob, entropy = logprobs_fn(logits, labels, calculate_entropy, entropy_grad)
        if flat is not None:
            bs, width = r.shape
            log_prob = unpack_to_response(log_prob, index, bs, width)
            entropy = None if entropy is None else unpack_to_response(entropy, index, bs, width)
        return log_prob, entropy

    @torch.no_grad()
    def compute_log_prob(self, data: DataProto, calculate_entropy: bool = False):
        """Per-token log-probs (bs, R) of ``responses``, and entropies (bs, R) when asked; micro-batched."""
        was_training = self.actor_module.training
        self.actor_module.eval()
        micro_bsz = data.meta_info.get("micro_batch_size", 128)
        temperature = _scoring_temperature(data)
        keys = ["responses", "input_ids", "attention_mask", "position_ids"]
        micros, groups = make_micro_batches(
            data.select(batch_keys=keys),
            micro_bsz,
            data.meta_info.get("use_dynamic_bsz", False),
            data.meta_info.get("max_token_len"),
            keep_prompts_together=self.use_shared_prefix,
        )
        log_probs, entropys = [], []
        for micro in micros:
            log_prob, entropy = self._forward_micro(micro.batch, temperature, calculate_entropy)
            log_probs.append(log_prob)
            if calculate_entropy:
                entropys.append(entropy)
        self.actor_module.train(was_training)
        log_probs = torch.cat(log_probs)
        entropys = torch.cat(entropys) if calculate_entropy else None
        if groups is not None:  # token-budget micro-batches regrouped the rows: restore the batch order
            reverse = get_reverse_idx(groups)
            log_probs = log_probs[reverse]
            entropys = entropys[reverse] if entropys is not None else None
        return log_probs, entropys

    def update_policy(self, data: DataProto) -> dict[str, list[float]]:
        """PPO epochs over mini-batches (one optimizer step each), micro-batches accumulating gradients.

        Needs ``responses``, ``response_mask``, ``input_ids``, ``attention_mask``, ``position_ids``,
        ``old_log_probs``, ``advantages`` and, with ``use_kl_loss``, ``ref_log_prob``. Without ``old_log_probs``
        (the trainer skipped the old-log-prob pass because the update is exactly on-policy: one epoch, one
        mini-batch) the current log-probs, detached, stand in for them, ``actor/entropy`` comes from this pass and
        ``on_policy_log_probs`` keeps them (batch order) for the trainer's mismatch metrics. ``rollout_is_weights``
        (the trainer's rollout correction), when the batch has them, multiply each token's policy loss.

        Each micro-batch's loss is weighted by `core_algos.micro_batch_loss_weight` (over all data-parallel ranks), so
        the accumulated gradient equals the whole mini-batch's, for fixed-size and token-budget (``use_dynamic_bsz``)
        micro-batches alike, on any number of workers.
        """
        self.actor_module.train()
        temperature = _scoring_temperature(data)
        data = data.select(batch_keys=self._update_batch_keys(data))
        plan = self._plan_update(data, temperature)
        metrics: dict[str, list[float]] = defaultdict(list)
        self.on_policy_log_probs = None
        stopped = False
        for step, (order, mini) in enumerate(self._mini_batches(data, plan.mini_bsz)):
            self.actor_optimizer.zero_grad(set_to_none=True)
            result = self._accumulate_gradients(mini, plan, plan.measures_entropy(step))
            # the mini-batch's losses, KL and entropy aggregated exactly as the loss is (all ranks, all micros)
            for k, v in mini_batch_means(result.weighted).items():
                metrics[k].append(v)
            if plan.on_policy:  # the old log-probs the trainer skipped, for its mismatch metrics
                self.on_policy_log_probs = _in_batch_order(result.log_probs, order, result.groups)
            elif step > 0:  # the first mini-batch has not moved yet
                stopped = self._steer_step_size(plan.region, result.drift, metrics)
                if stopped:  # too far from the sampling policy: this and the remaining updates are skipped
                    break
            metrics["actor/grad_norm"].append(self._apply_gradients())
        if plan.region is not None:
            metrics["actor/lr_scale"].append(self.lr_scale)
            metrics["actor/trust_region_stop"].append(float(stopped))
        self.actor_optimizer.zero_grad(set_to_none=True)
        return dict(metrics)

    def _update_batch_keys(self, data: DataProto) -> list[str]:
        """The batch keys the update reads; refuses two corrections of the sampler/trainer mismatch at once, and the
        actor's own correction (``tis_imp_ratio_cap``) without the sampler's log-probs."""
        cap = self.config.tis_imp_ratio_cap
        keys = ["responses", "response_mask", "input_ids", "attention_mask", "position_ids", "advantages"]
        if "old_log_probs" in data.batch:
            keys.append("old_log_probs")
        if self.config.use_kl_loss:
            keys.append("ref_log_prob")
        if "rollout_is_weights" in data.batch:  # the trainer's rollout correction (algorithm.rollout_correction)
            if cap > 0:
                raise ValueError(
                    "two corrections of the sampler/trainer mismatch: actor_rollout_ref.actor.tis_imp_ratio_cap > 0 "
                    "and algorithm.rollout_correction.rollout_is (the batch has rollout_is_weights); keep one "
                    "(rollout_is=token with rollout_is_threshold=cap is the same truncated weight)"
                )
            keys.append("rollout_is_weights")
        if cap > 0:
            if "rollout_log_probs" not in data.batch:
                raise KeyError(
                    "actor.tis_imp_ratio_cap > 0 corrects the sampler/trainer mismatch with the sampler's own "
                    "log-probs, but the batch has no 'rollout_log_probs' (the rollout writes them)"
                )
            keys.append("rollout_log_probs")
        return keys

    def _plan_update(self, data: DataProto, temperature: float) -> _UpdatePlan:
        """Every mode choice of this update, from the config and the (selected) batch."""
        cfg = self.config
        on_policy = "old_log_probs" not in data.batch
        mini_bsz = cfg.ppo_mini_batch_size * data.meta_info.get("rollout_n", 1) // dp_size()  # prompts, all ranks
        if on_policy and (cfg.ppo_epochs > 1 or len(data) > mini_bsz):
            # the policy moves after the first optimizer step: later ratios need the pre-update log-probs
            raise KeyError(
                f"update_policy: the batch has no 'old_log_probs', but the update is not one step on-policy "
                f"(ppo_epochs={cfg.ppo_epochs}, {len(data)} rows in mini-batches of {mini_bsz}). Compute them "
                "first (compute_log_prob)"
            )
        loss_mode = cfg.policy_loss.loss_mode
        policy_loss_fn = core_algos.get_policy_loss_fn(loss_mode)
        if "rollout_is_weights" in data.batch:
            is_weights = _is_weights_from_batch
        else:
            is_weights = partial(_truncated_is_weights, cap=cfg.tis_imp_ratio_cap)
        return _UpdatePlan(
            temperature=temperature,
            on_policy=on_policy,
            mini_bsz=mini_bsz,
            micro_batches=partial(
                make_micro_batches,
                micro_batch_size=cfg.ppo_micro_batch_size_per_gpu,
                use_dynamic_bsz=cfg.use_dynamic_bsz,
                max_token_len=cfg.ppo_max_token_len_per_gpu,
                keep_prompts_together=self.use_shared_prefix,
            ),
            policy_loss_fn=policy_loss_fn,
            agg_mode=self._loss_agg_mode(loss_mode),
            rollout_is_weights=is_weights,
            entropy_in_loss=cfg.entropy_coeff != 0,
            entropy_every_step=cfg.entropy_coeff != 0 or on_policy,
            # bypass mode skipped the old-log-prob pass that measures the entropy: the first mini-batch's pass
            # measures it, before any optimizer step (the sampling policy's entropy, on that share of the batch)
            entropy_first_step=loss_mode == "bypass_mode",
            kl_in_loss=cfg.use_kl_loss,
            # on-policy there is one step and nothing to steer; with the control off the drift is only logged
            region=cfg.trust_region if self.trust_region_on and not on_policy else None,
        )

    def _loss_agg_mode(self, loss_mode: str) -> str:
        """The aggregation every loss term uses (`core_algos.effective_loss_agg_mode`); warns once when the loss
        overrides ``actor.loss_agg_mode``."""
        agg_mode = core_algos.effective_loss_agg_mode(loss_mode, self.config.loss_agg_mode)
        if agg_mode != self.config.loss_agg_mode and not self._warned_agg_mode:
            self._warned_agg_mode = True
            logger.warning(
                "policy_loss.loss_mode=%s aggregates with %s (its paper's objective); actor.loss_agg_mode=%s is not "
                "used for it",
                loss_mode,
                agg_mode,
                self.config.loss_agg_mode,
            )
        return agg_mode

    def _mini_batches(self, data: DataProto, mini_bsz: int) -> Iterator[tuple[torch.Tensor, DataProto]]:
        """Every optimizer step's (row order, mini-batch): ``ppo_epochs`` passes over ``data``, each cut into
        mini-batches of ``mini_bsz`` rows; row j of a pass is ``data`` row ``order[j]`` (reshuffled each pass with
        ``shuffle``, from a generator seeded by the step so every rank cuts alike)."""
        cfg = self.config
        generator = torch.Generator().manual_seed(int(data.meta_info.get("global_steps", 0)))
        for _ in range(cfg.ppo_epochs):
            order = torch.randperm(len(data), generator=generator) if cfg.shuffle else torch.arange(len(data))
            shuffled = data[order] if cfg.shuffle else data
            for mini in shuffled.split(mini_bsz):
                yield order, mini

    def _accumulate_gradients(self, mini: DataProto, plan: _UpdatePlan, measure_entropy: bool) -> _MiniBatchResult:
        """Forward and backward of every micro-batch of ``mini``, each loss weighted so the summed gradient is the
        whole mini-batch's; with their weighted metrics and, off-policy, the drift from the old policy."""
        micros, groups = plan.micro_batches(mini)
        counts = all_reduce_sum(core_algos.loss_normalizer_counts(mini.batch["response_mask"]))
        result = _MiniBatchResult(groups=groups)
        for micro in micros:
            mask = micro.batch["response_mask"]
            weight = core_algos.micro_batch_loss_weight(mask, counts, plan.agg_mode, dp_size())
            stats, log_prob = self._micro_step(micro, plan, weight, measure_entropy)
            if plan.on_policy:
                result.log_probs.append(log_prob)
            else:
                result.drift += torch.stack(
                    core_algos.policy_drift_kl_sum(micro.batch["old_log_probs"], log_prob, mask)
                )
            token_weight = core_algos.micro_batch_loss_weight(mask, counts, "token-mean", dp_size())
            for k, v in stats.items():  # loss terms as the loss aggregates; rates and constants per token
                result.weighted[k] += v * (token_weight if k in TOKEN_MEAN_METRICS else weight)
        return result

    def _apply_gradients(self) -> float:
        """Clip and take the optimizer step; returns the gradient norm. A non-finite norm skips the step rather than
        poison the weights (the metric shows it)."""
        grad_norm = clip_grad_norm(self.actor_module, self.config.grad_clip)
        if torch.isfinite(grad_norm):
            self._optimizer_step()
            failpoint("actor.update")
        else:
            self.actor_optimizer.zero_grad(set_to_none=True)
        return float(grad_norm)

    def _steer_step_size(self, region, drift: torch.Tensor, metrics: dict[str, list[float]]) -> bool:
        """actor.trust_region on one mini-batch's measured drift (summed over ranks, so every rank decides alike):
        log it and, with the control on (``region``), move the learning-rate multiplier and say whether the step
        stops here."""
        total, count = all_reduce_sum(drift).tolist()
        kl = total / max(count, 1.0)
        metrics["actor/policy_drift_kl"].append(kl)
        if region is None:
            return False
        if region.early_stop_ratio > 0 and kl > region.early_stop_ratio * region.target_kl:
            self.lr_scale = max(region.min_lr_ratio, self.lr_scale / region.lr_factor) if region.adapt_lr else 1.0
            return True
        if region.adapt_lr:
            self.lr_scale = core_algos.adapt_lr_scale(
                self.lr_scale,
                kl,
                region.target_kl,
                region.lr_factor,
                region.min_lr_ratio,
                region.max_lr_ratio,
                region.lr_increase_factor,
            )
        return False

    def _optimizer_step(self) -> None:
        """One optimizer step at the scheduled learning rate times ``lr_scale``; the schedule itself is untouched (its
        next step recomputes the rate from its own base)."""
        if self.lr_scale == 1.0:
            self.actor_optimizer.step()
            return
        scheduled = [group["lr"] for group in self.actor_optimizer.param_groups]
        for group in self.actor_optimizer.param_groups:
            group["lr"] = group["lr"] * self.lr_scale
        try:
            self.actor_optimizer.step()
        finally:
            for group, lr in zip(self.actor_optimizer.param_groups, scheduled):
                group["lr"] = lr

    def _micro_step(
        self, micro: DataProto, plan: _UpdatePlan, scale: float, measure_entropy: bool
    ) -> tuple[dict[str, Any], torch.Tensor]:
        """Forward, loss and backward of one micro-batch, its loss times ``scale``: (its metrics, its log-probs (bs, R)
        detached). The entropy is measured with ``measure_entropy``."""
        b = micro.batch
        response_mask = b["response_mask"].to(torch.float32)
        log_prob, entropy_tokens = self._forward_micro(
            b, plan.temperature, calculate_entropy=measure_entropy, entropy_grad=plan.entropy_in_loss
        )
        old_log_prob = log_prob.detach() if plan.on_policy else b["old_log_probs"]
        pg_loss, pg_metrics = plan.policy_loss_fn(
            old_log_prob=old_log_prob,
            log_prob=log_prob,
            advantages=b["advantages"],
            response_mask=response_mask,
            loss_agg_mode=plan.agg_mode,
            config=self.config,
            rollout_is_weights=plan.rollout_is_weights(b, old_log_prob),
        )
        stats: dict[str, Any] = {}
        loss = pg_loss
        if measure_entropy:
            entropy = core_algos.agg_loss(entropy_tokens, response_mask, plan.agg_mode)
            if plan.entropy_in_loss:
                loss = loss - self.config.entropy_coeff * entropy
            stats["actor/entropy"] = entropy.item()
        if plan.kl_in_loss:
            loss = loss + self._kl_loss_term(log_prob, b["ref_log_prob"], response_mask, plan.agg_mode, stats)
        (loss * scale).backward()
        stats["actor/pg_loss"] = pg_loss.item()
        stats.update(pg_metrics)  # the loss's own rates (pg_clipfrac, ppo_kl, ...), plain floats
        return stats, log_prob.detach()

    def _kl_loss_term(
        self,
        log_prob: torch.Tensor,
        ref_log_prob: torch.Tensor,
        response_mask: torch.Tensor,
        agg_mode: str,
        stats: dict[str, Any],
    ) -> torch.Tensor:
        """``kl_loss_coef`` times the aggregated KL to the reference policy (``use_kl_loss``); logs it in ``stats``."""
        cfg = self.config
        kl_loss = core_algos.agg_loss(
            core_algos.kl_penalty(log_prob, ref_log_prob, cfg.kl_loss_type), response_mask, agg_mode
        )
        stats["actor/kl_loss"] = kl_loss.item()
        stats["actor/kl_coef"] = cfg.kl_loss_coef
        return cfg.kl_loss_coef * kl_loss


def _in_batch_order(chunks: list[torch.Tensor], order: torch.Tensor, groups: list[list[int]] | None) -> torch.Tensor:
    """Per-micro-batch rows (bs_i, R) joined back in the batch's row order: micro-batch rows are consecutive rows of
    the mini-batch, or its rows ``groups[i]`` (token-budget micro-batches), and mini-batch row j is batch row
    ``order[j]`` (shuffled or not)."""
    rows = torch.cat(chunks)
    within = torch.arange(len(rows)) if groups is None else torch.tensor([i for g in groups for i in g])
    out = torch.empty_like(rows)
    out[order[within].to(rows.device)] = rows
    return out
