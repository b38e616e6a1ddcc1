"""The PPO-family controller: one program holds the algorithm's dataflow and drives the role workers.

The class keeps verl's name (``RayPPOTrainer``) so ported scripts find it, but it knows nothing of processes: it
calls worker-group methods (``generate_sequences``, ``compute_log_prob``, ``update_actor``, ...) on whatever backend
built them. With the local backend they are in-process objects; with Ray they are actor groups.

One step, as the papers draw it (``_step``; ``fit`` loops it, ``train_step`` runs one on given prompts):
    generate -> reward -> old log-prob -> reference -> values -> rewards -> advantages -> critic update -> actor update

Step callbacks (:mod:`verl.engine.callbacks`) run at ``on_rewards`` (before advantages), ``on_advantages`` (before
the updates), ``on_validation`` and ``on_step_end``; evaluators add ``eval/<name>_*`` metrics to each validation.
"""

from __future__ import annotations

import json
import logging
import os
import random
import shutil
import uuid
from collections import defaultdict
from typing import Any

import numpy as np
import torch
from tqdm import tqdm

from verl.engine.callbacks import apply_reward_hooks, run_callbacks
from verl.protocol import DataProto
from verl.trainer.ppo import core_algos
from verl.trainer.ppo.metric_utils import (
    compute_data_metrics,
    compute_throughput_metrics,
    compute_timing_metrics,
    marked_timer,
    reduce_metrics,
)
from verl.utils.dataset.rl_dataset import PromptLoader, collate_prompts
from verl.utils.tracking import Tracking

logger = logging.getLogger(__name__)

CRITIC_ESTIMATORS = ("gae",)


def compute_advantage(
    data: DataProto,
    adv_estimator: str,
    gamma: float = 1.0,
    lam: float = 1.0,
    norm_adv_by_std_in_grpo: bool = True,
    config=None,
) -> DataProto:
    """Fill ``advantages`` and ``returns`` with the registered estimator ``adv_estimator``."""
    fn = core_algos.get_adv_estimator_fn(adv_estimator)
    b = data.batch
    advantages, returns = fn(
        token_level_rewards=b["token_level_rewards"],
        response_mask=b["response_mask"],
        index=data.non_tensor_batch["uid"],
        values=b["values"] if "values" in b else None,
        reward_baselines=b["reward_baselines"] if "reward_baselines" in b else None,
        gamma=gamma,
        lam=lam,
        norm_adv_by_std_in_grpo=norm_adv_by_std_in_grpo,
        config=config,
    )
    data.batch["advantages"], data.batch["returns"] = advantages, returns
    return data


def apply_kl_penalty(
    data: DataProto, kl_ctrl, kl_penalty: str = "kl", reward_temp: float = 1.0
) -> tuple[DataProto, dict[str, float]]:
    """token_level_rewards = token_level_scores / reward_temp - beta * KL(old || ref), beta from the (fixed or
    adaptive) controller."""
    rewards, metrics = core_algos.apply_kl_penalty(
        data.batch["token_level_scores"] / reward_temp,
        data.batch["old_log_probs"],
        data.batch["ref_log_prob"],
        data.batch["response_mask"],
        kl_ctrl,
        kl_penalty,
    )
    data.batch["token_level_rewards"] = rewards
    return data, metrics


def compute_reward(data: DataProto, reward_fn) -> tuple[torch.Tensor, dict[str, list]]:
    result = reward_fn(data, return_dict=True)
    return result["reward_tensor"], result.get("reward_extra_info", {})


class RayPPOTrainer:
    """The controller. ``workers`` maps role names (``actor_rollout``, ``critic``, ``rm``) to worker(-group)s."""

    def __init__(
        self,
        config,
        tokenizer,
        workers: dict[str, Any],
        reward_fn,
        val_reward_fn,
        train_dataset,
        val_dataset,
        total_training_steps: int,
        backend=None,
    ):
        self.config = config
        self.tokenizer = tokenizer
        self.backend = backend  # None: local workers; Ray: accounts its overhead, shuts the groups down
        self.actor_rollout_wg = workers["actor_rollout"]
        self.critic_wg = workers.get("critic")
        self.rm_wg = workers.get("rm")
        self.reward_fn, self.val_reward_fn = reward_fn, val_reward_fn
        self.train_dataset, self.val_dataset = train_dataset, val_dataset
        self.total_training_steps = total_training_steps
        alg = config.algorithm
        self.use_critic = self.critic_wg is not None
        self.use_reference_policy = uses_reference_policy(config)
        self.use_rm = self.rm_wg is not None
        self.kl_ctrl_in_reward = core_algos.get_kl_controller(alg.kl_ctrl) if alg.use_kl_in_reward else None
        data_seed = config.data.seed if config.data.seed is not None else config.trainer.seed
        self.train_loader = PromptLoader(
            train_dataset,
            config.data.train_batch_size,
            tokenizer.pad_token_id,
            shuffle=config.data.shuffle,
            seed=data_seed,
        )
        self.global_steps = 0
        self.callbacks: list = []  # step callbacks (see verl.engine); each sees the step's batch and metrics
        self.evaluators: dict[str, Any] = {}  # name -> evaluator, run on every validation (eval/<name>_*)
        self.reward_hooks: list = []  # fn(reward_tensor) -> reward_tensor, applied to training scores
        self.stop_reason: str | None = None
        self.history: dict[str, list] = defaultdict(list)
        self.last_val: dict[str, float] = {}
        self._logger: Tracking | None = None
        self._resumed = False

    # ---------------------------------------------------------------- the loop
    def init(self) -> None:
        """Resume from the latest checkpoint (once) and open the loggers; ``fit`` and ``train_step`` call it."""
        if not self._resumed:
            self._load_checkpoint()
            self._resumed = True
        if self._logger is None:
            cfg = self.config
            self._logger = Tracking(
                cfg.trainer.logger,
                self._checkpoint_root(),
                config=cfg,
                console_keys=[
                    "critic/score/mean",
                    "val-core/acc",
                    "actor/pg_loss",
                    "actor/entropy",
                    "response_length/mean",
                    "timing_s/step",
                ],
                write=tqdm.write,
            )

    def close(self) -> None:
        """Close the loggers (``init`` reopens them); the workers and the training state stay."""
        if self._logger is not None:
            self._logger.close()
            self._logger = None

    def shutdown(self) -> None:
        """Close the loggers and stop the backend's worker processes (Ray); the trainer is unusable after it."""
        self.close()
        if self.backend is not None:
            self.backend.shutdown()
            self.backend = None

    def resume_hint(self) -> str:
        """Where a stopped run would resume from, as a sentence for error messages."""
        latest = os.path.join(self._checkpoint_root(), "latest_checkpointed_iteration.txt")
        if os.path.isfile(latest):
            step = open(latest).read().strip()
            return (
                f"The last checkpoint is global_step_{step} in {self._checkpoint_root()}: run the same command again "
                "to resume from it (trainer.resume_mode=auto)"
            )
        return "No checkpoint was saved yet (trainer.save_freq): running the same command again starts over"

    def fit(self) -> dict[str, Any]:
        """Train until ``total_training_steps``; returns the last validation metrics and the metric history."""
        self.init()
        if self.config.trainer.get("val_only", False):  # verl's trainer.val_only: evaluate the policy as it is, stop
            if self.val_reward_fn is None:
                raise ValueError("trainer.val_only=true needs validation data (data.val_files)")
            try:
                self._log(self._run_validation(), step=self.global_steps)
            finally:
                self.close()
            return {"val": self.last_val, "history": dict(self.history), "global_steps": self.global_steps}
        if self.config.trainer.val_before_train and self.val_reward_fn is not None and self.global_steps == 0:
            self._log(self._run_validation(), step=0)
        if self.global_steps >= self.total_training_steps:
            print(
                f"already at step {self.global_steps} of {self.total_training_steps} in {self._checkpoint_root()}: "
                "nothing to do (raise trainer.total_training_steps, or trainer.resume_mode=disable to start over)"
            )
        progress = tqdm(total=self.total_training_steps, initial=self.global_steps, desc="ppo", disable=None)
        try:
            while self.global_steps < self.total_training_steps:
                self._step()
                progress.update(1)
                if self.stop_reason is not None:
                    break  # a callback asked to stop (e.g. early stopping)
        finally:  # also when a step raises: the loggers are flushed and closed, checkpoints on disk stay as they are
            progress.close()
            self.close()
        return {"val": self.last_val, "history": dict(self.history), "global_steps": self.global_steps}

    def train_step(self, prompts: DataProto | None = None) -> dict[str, float]:
        """One step of the same loop ``fit`` runs, on ``prompts`` (a batch of left-padded prompts with
        ``input_ids``, ``attention_mask``, ``position_ids``) or, when None, on the next batch of the training data.
        Validation and checkpoints happen at ``trainer.test_freq`` / ``save_freq`` as in ``fit``. Returns the step's
        metrics (also logged and kept in ``history``)."""
        self.init()
        return self._step(prompts)

    def _step(self, prompts: DataProto | None = None) -> dict[str, float]:
        self.global_steps += 1
        metrics, timing_raw = {}, {}
        with marked_timer("step", timing_raw):
            batch = self._rollout_batch(metrics, timing_raw, prompts)  # generate + reward (+ DAPO refill)
            self._dump_generations(batch, self.config.trainer.get("rollout_data_dir"))
            batch = self._train_on_batch(batch, metrics, timing_raw)  # log-probs, values, advantages, updates
            self._maybe_validate(metrics, timing_raw)
            self._maybe_save_checkpoint(timing_raw)
        if self.backend is not None:  # driver time in worker calls not spent computing: Ray, pickling, transfer
            timing_raw["ray_overhead"] = self.backend.pop_overhead_s()
            metrics["perf/ray_overhead_fraction"] = timing_raw["ray_overhead"] / max(timing_raw["step"], 1e-9)
        metrics.update(self._data_metrics(batch, timing_raw))
        stops = run_callbacks(self.callbacks, "on_step_end", self, batch, metrics)
        self._log(metrics, step=self.global_steps)
        if any(s is False for s in stops) and self.stop_reason is None:
            self.stop_reason = f"a step callback returned False at step {self.global_steps}"
        return metrics

    def _is_last_step(self) -> bool:
        return self.global_steps == self.total_training_steps

    def _maybe_validate(self, metrics: dict, timing_raw: dict) -> None:
        test_freq = self.config.trainer.test_freq
        if self.val_reward_fn is None or test_freq <= 0:
            return
        if self._is_last_step() or self.global_steps % test_freq == 0:
            with marked_timer("testing", timing_raw):
                metrics.update(self._run_validation())

    def _maybe_save_checkpoint(self, timing_raw: dict) -> None:
        save_freq = self.config.trainer.save_freq
        if save_freq > 0 and (self._is_last_step() or self.global_steps % save_freq == 0):
            with marked_timer("save_checkpoint", timing_raw):
                self._save_checkpoint()

    def _data_metrics(self, batch: DataProto, timing_raw: dict) -> dict[str, float]:
        t = self.config.trainer
        metrics = compute_data_metrics(batch, self.use_critic)
        if "overlong_penalty" in batch.batch:
            metrics["reward/overlong_penalty_mean"] = batch.batch["overlong_penalty"].mean().item()
        for key in batch.meta_info.get("reward_extra_keys", []):  # the reward function's own numeric fields
            values = _finite_numbers(batch.non_tensor_batch.get(key, []))
            if values:
                metrics[f"reward/{key}/mean"] = float(np.mean(values))
        metrics.update(compute_timing_metrics(batch, timing_raw))
        metrics.update(compute_throughput_metrics(batch, timing_raw, t.n_gpus_per_node * t.nnodes))
        return metrics

    def _log(self, metrics: dict[str, float], step: int) -> None:
        if self._logger is not None:
            self._logger.log(metrics, step=step)
        _append(self.history, metrics, step)

    def _rollout_batch(self, metrics: dict, timing_raw: dict, prompts: DataProto | None = None) -> DataProto:
        """Sample ``n`` responses per prompt and score them; with DAPO dynamic sampling, keep generating until the
        batch holds ``train_batch_size`` prompt groups whose rewards are not all equal (given ``prompts``: one
        generation round on them, keeping the groups that vary)."""
        cfg = self.config
        filter_cfg = cfg.algorithm.filter_groups
        kept: list[DataProto] = []
        num_groups, num_gen_batches = 0, 0
        while True:
            num_gen_batches += 1
            batch = self.train_loader.next_batch() if prompts is None else _copy_prompts(prompts)
            batch.non_tensor_batch["uid"] = np.array(
                [str(uuid.UUID(int=random.getrandbits(128))) for _ in range(len(batch))], dtype=object
            )
            gen_batch = batch.select(batch_keys=["input_ids", "attention_mask", "position_ids"])
            n = cfg.actor_rollout_ref.rollout.n
            gen_batch = gen_batch.repeat(n, interleave=True)
            # each response's sampling randomness is keyed by its index: the same samples on any number of workers
            gen_batch.batch["sample_index"] = torch.arange(len(gen_batch), dtype=torch.int64)
            with marked_timer("gen", timing_raw):
                gen_output = self.actor_rollout_wg.generate_sequences(gen_batch)
            for key, seconds in gen_output.meta_info.pop("timing", {}).items():  # e.g. the weight reshard (Ray)
                timing_raw[key] = timing_raw.get(key, 0.0) + seconds
            if cfg.algorithm.adv_estimator == "remax":
                with marked_timer("gen_max", timing_raw):
                    greedy = batch.select(batch_keys=["input_ids", "attention_mask", "position_ids"])
                    greedy.meta_info["do_sample"] = False
                    baseline_out = self.actor_rollout_wg.generate_sequences(greedy)
                    baseline_batch = batch.select(batch_keys=[], non_tensor_batch_keys=list(batch.non_tensor_batch))
                    baseline_batch = baseline_batch.union(baseline_out)
                    baseline_scores, _ = self._score(baseline_batch)
                    # on the scale of the sampled responses' rewards: the same overlong penalty and reward_temp
                    baseline = baseline_scores.sum(-1) + self._overlong_penalty(baseline_out.batch["response_mask"])
                    batch.batch["reward_baselines"] = baseline / float(cfg.algorithm.get("reward_temp", 1.0))
            batch = batch.repeat(n, interleave=True)
            batch.pop(batch_keys=["input_ids", "attention_mask", "position_ids"])
            batch = batch.union(gen_output)
            with marked_timer("reward", timing_raw):
                reward_tensor, extra = self._score(batch)
            batch.batch["token_level_scores"] = reward_tensor
            for k, v in extra.items():
                batch.non_tensor_batch[k] = np.array(v, dtype=object)
            batch.meta_info["reward_extra_keys"] = [k for k in extra if k not in ("score", "reward_errors")]
            self._apply_overlong_penalty(batch)
            errors = int(extra.get("reward_errors", [0])[0]) if extra.get("reward_errors") else 0
            metrics["reward/errors"] = metrics.get("reward/errors", 0) + errors
            if not filter_cfg.enable:
                return batch
            batch, kept_groups = _filter_groups(batch, filter_cfg.metric, n)
            kept.append(batch)
            num_groups += kept_groups
            target = cfg.data.train_batch_size if prompts is None else len(prompts)
            limit = filter_cfg.max_num_gen_batches if prompts is None else 1
            if num_groups >= target or (limit > 0 and num_gen_batches >= limit):
                metrics["train/num_gen_batches"] = num_gen_batches
                metrics["train/num_kept_groups"] = num_groups
                if num_groups >= target:
                    return _concat_filling_extras(kept)[: target * n]
                # a partial batch: whole groups, as many as split evenly over the data-parallel workers
                groups = _whole_groups_for_workers(num_groups, n, self._dp_world_size())
                if groups == 0:
                    raise RuntimeError(
                        f"dynamic sampling kept {num_groups} groups in {num_gen_batches} generation batches (every "
                        "other group's rewards were equal), too few to train on "
                        f"{self._dp_world_size()} data-parallel workers. Raise "
                        "algorithm.filter_groups.max_num_gen_batches or disable filter_groups."
                    )
                return _concat_filling_extras(kept)[: groups * n]

    def _dp_world_size(self) -> int:
        """Data-parallel workers the update batches are split over (1 with the local backend: check_config)."""
        return int(self.config.trainer.n_gpus_per_node * self.config.trainer.nnodes)

    def _score(self, batch: DataProto) -> tuple[torch.Tensor, dict[str, list]]:
        """Training scores: the reward model (if any), then the reward function, then the reward hooks."""
        if self.use_rm:
            batch = batch.union(self.rm_wg.compute_rm_score(batch))
        reward_tensor, extra = compute_reward(batch, self.reward_fn)
        return apply_reward_hooks(self.reward_hooks, reward_tensor), extra

    def _overlong_penalty(self, response_mask: torch.Tensor) -> torch.Tensor:
        """DAPO's soft overlong penalty per row (zeros when ``reward_model.overlong_buffer`` is off)."""
        ob = self.config.reward_model.overlong_buffer
        lengths = response_mask.sum(-1)
        if not ob.enable:
            return torch.zeros(len(lengths), dtype=torch.float32)
        return core_algos.compute_overlong_penalty(
            lengths, self.config.data.max_response_length, ob.len, ob.penalty_factor
        ).float()

    def _apply_overlong_penalty(self, batch: DataProto) -> None:
        if not self.config.reward_model.overlong_buffer.enable:
            return
        mask = batch.batch["response_mask"]
        penalty = self._overlong_penalty(mask)
        last = (mask.sum(-1) - 1).clamp(min=0).long()
        scores = batch.batch["token_level_scores"]
        scores[torch.arange(len(batch)), last] += penalty.to(scores.dtype)
        batch.batch["overlong_penalty"] = penalty  # kept with its rows: the metric covers the trained batch

    def _train_on_batch(self, batch: DataProto, metrics: dict, timing_raw: dict) -> DataProto:
        cfg = self.config
        alg = cfg.algorithm
        batch.meta_info["global_steps"] = self.global_steps
        batch.meta_info["rollout_n"] = cfg.actor_rollout_ref.rollout.n
        # hints for data-parallel workers (ignored by local ones): balance tokens across workers, and split each
        # optimizer mini-batch evenly over them (verl.single_controller.base.decorator.dp_row_order)
        batch.meta_info["balance_batch"] = bool(cfg.trainer.balance_batch)
        with marked_timer("old_log_prob", timing_raw):
            batch = self._old_log_prob(batch, metrics)
        if self.use_reference_policy:
            with marked_timer("ref", timing_raw):
                batch = self._ref_log_prob(batch)
        if self.use_critic:
            with marked_timer("values", timing_raw):
                batch = batch.union(self.critic_wg.compute_values(batch))
        with marked_timer("adv", timing_raw):
            batch = self._compute_rewards(batch, metrics)  # scores / reward_temp (- KL): token_level_rewards
            run_callbacks(self.callbacks, "on_rewards", self, batch, metrics)
            batch = compute_advantage(
                batch, alg.adv_estimator, alg.gamma, alg.lam, alg.norm_adv_by_std_in_grpo, config=alg
            )
        run_callbacks(self.callbacks, "on_advantages", self, batch, metrics)
        if self.use_critic:
            with marked_timer("update_critic", timing_raw):
                out = self.critic_wg.update_critic(_with_mini_batch_rows(batch, cfg.critic.ppo_mini_batch_size))
            metrics.update(reduce_metrics(out.meta_info["metrics"]))
        if self.global_steps > cfg.trainer.critic_warmup:
            with marked_timer("update_actor", timing_raw):
                mini = cfg.actor_rollout_ref.actor.ppo_mini_batch_size
                out = self.actor_rollout_wg.update_actor(_with_mini_batch_rows(batch, mini))
            metrics.update(reduce_metrics(out.meta_info["metrics"]))
        return batch

    def _old_log_prob_is_current(self, batch: DataProto) -> bool:
        """Whether the old-log-prob pass can be skipped because it would equal the update's own log-probs: one PPO
        epoch over exactly one mini-batch (the update runs on the weights that sampled), no KL in the reward and no
        step callbacks (both read ``old_log_probs`` before the update). ``actor.skip_old_log_prob_on_policy`` turns
        it off. The actor then uses its current log-probs, detached, as ``old_log_probs`` (models without dropout,
        as Qwen2/Llama configs)."""
        a = self.config.actor_rollout_ref.actor
        n = self.config.actor_rollout_ref.rollout.n
        return (
            bool(a.get("skip_old_log_prob_on_policy", False))
            and a.ppo_epochs == 1
            and a.ppo_mini_batch_size * n >= len(batch)
            and not self.config.algorithm.use_kl_in_reward
            and not self.callbacks
        )

    def _old_log_prob(self, batch: DataProto, metrics: dict) -> DataProto:
        if self._old_log_prob_is_current(batch):
            return batch  # the actor's update computes them (and the entropy metric) in its own pass
        old = self.actor_rollout_wg.compute_log_prob(batch)
        entropy = old.batch.pop("entropys")
        metrics["actor/entropy"] = core_algos.agg_loss(
            entropy, batch.batch["response_mask"].float(), self.config.actor_rollout_ref.actor.loss_agg_mode
        ).item()
        return batch.union(old)

    def _ref_log_prob(self, batch: DataProto) -> DataProto:
        """``ref_log_prob`` and, for callbacks, ``token_level_kl``: the ``algorithm.kl_penalty`` estimate per token."""
        batch = batch.union(self.actor_rollout_wg.compute_ref_log_prob(batch))
        b = batch.batch
        if "old_log_probs" not in b:  # skipped on-policy pass: no callback reads token_level_kl
            return batch
        kind = self.config.algorithm.kl_penalty.rstrip("+")
        kl = core_algos.kl_penalty(b["old_log_probs"], b["ref_log_prob"], kind).detach()
        b["token_level_kl"] = kl * b["response_mask"].to(kl.dtype)
        return batch

    def _compute_rewards(self, batch: DataProto, metrics: dict) -> DataProto:
        """token_level_rewards = token_level_scores / algorithm.reward_temp, minus the KL penalty when it is in the
        reward. ``token_level_scores`` (and the ``critic/score/*`` metrics) stay the raw scores."""
        alg = self.config.algorithm
        temp = float(alg.get("reward_temp", 1.0))
        if alg.use_kl_in_reward:
            batch, kl_metrics = apply_kl_penalty(batch, self.kl_ctrl_in_reward, alg.kl_penalty, temp)
            metrics.update(kl_metrics)
        else:
            batch.batch["token_level_rewards"] = batch.batch["token_level_scores"] / temp
        return batch

    # ---------------------------------------------------------------- validation
    def _run_validation(self) -> dict[str, float]:
        """``_validate``, then the ``on_validation`` callbacks; remembers the result as ``last_val``."""
        metrics = self._validate()
        run_callbacks(self.callbacks, "on_validation", self, metrics)
        self.last_val = metrics
        return metrics

    def _validate(self) -> dict[str, float]:
        """``rollout.val_kwargs.n`` responses (greedy by default: ``val_kwargs``) to every validation prompt, scored
        by ``val_reward_fn``.

        Metrics, with N = ``val_kwargs.n``: ``val-core/<data_source>/reward/mean@N``, ``val-core/<data_source>/acc/
        mean@N`` (share of full scores) and, for N > 1, ``.../acc/best@N`` (share of prompts with a full score among
        their N responses); ``val-core/acc`` and ``val-core/reward`` over all sources; ``val-aux/<data_source>/<key>/
        mean@N`` for each numeric field the reward function returns besides the score; ``eval/reward_mean`` and
        ``eval/reward_std`` (mean and population std of the sequence scores); each evaluator's ``eval/<name>_*``.
        Reward hooks and ``reward_temp`` do not apply here: these are the task's raw scores.
        """
        cfg = self.config
        n = max(int(cfg.actor_rollout_ref.rollout.val_kwargs.get("n", 1) or 1), 1)
        items = [self.val_dataset[i] for i in range(len(self.val_dataset))]
        bsz = cfg.data.val_batch_size or len(items)
        scores, sources, outputs = [], [], []
        extras: dict[str, list[float]] = defaultdict(list)
        num_logged, samples = int(cfg.trainer.get("log_val_generations", 0) or 0), []
        for start in range(0, len(items), bsz):
            batch = collate_prompts(items[start : start + bsz], self.tokenizer.pad_token_id).repeat(n, interleave=True)
            gen = batch.select(batch_keys=["input_ids", "attention_mask", "position_ids"])
            gen.meta_info["validate"] = True
            # keyed by the row's place in the whole validation set: the same samples on any number of workers
            gen.batch["sample_index"] = torch.arange(start * n, start * n + len(gen), dtype=torch.int64)
            out = self.actor_rollout_wg.generate_sequences(gen)
            batch.pop(batch_keys=["input_ids", "attention_mask", "position_ids"])
            batch = batch.union(out)
            if self.use_rm:
                batch = batch.union(self.rm_wg.compute_rm_score(batch))
            reward_tensor, extra = compute_reward(batch, self.val_reward_fn)
            batch.batch["token_level_scores"] = reward_tensor
            outputs.append(batch)
            scores.extend(reward_tensor.sum(-1).tolist())
            sources.extend(batch.non_tensor_batch["data_source"].tolist())
            samples.extend(self._generation_samples(batch, reward_tensor, limit=num_logged - len(samples)))
            self._dump_generations(batch, cfg.trainer.get("validation_data_dir"), append=start > 0)
            for key, values in extra.items():
                if key not in ("score", "reward_errors") and len(values) == len(batch):
                    extras[key].extend(values)
        metrics: dict[str, float] = {}
        for src in dict.fromkeys(sources):
            rows = [i for i, s in enumerate(sources) if s == src]
            vals = [scores[i] for i in rows]
            metrics[f"val-core/{src}/reward/mean@{n}"] = float(np.mean(vals))
            metrics[f"val-core/{src}/acc/mean@{n}"] = float(np.mean([v >= 1.0 for v in vals]))
            if n > 1:  # rows of one prompt are consecutive (interleaved repeat)
                groups = [vals[i : i + n] for i in range(0, len(vals), n)]
                metrics[f"val-core/{src}/acc/best@{n}"] = float(np.mean([max(g) >= 1.0 for g in groups]))
            for key, values in extras.items():
                numeric = _finite_numbers([values[i] for i in rows])
                if numeric:
                    metrics[f"val-aux/{src}/{key}/mean@{n}"] = float(np.mean(numeric))
        if samples:
            self._write_val_generations(samples)
        metrics["val-core/acc"] = float(np.mean([s >= 1.0 for s in scores]))
        metrics["val-core/reward"] = float(np.mean(scores))
        metrics["eval/reward_mean"] = float(np.mean(scores))
        metrics["eval/reward_std"] = float(np.std(scores))
        if self.evaluators:
            from verl.trainer.ppo.evaluators import run_evaluators

            metrics.update(
                run_evaluators(self.evaluators, self, concat_left_padded(outputs, self.tokenizer.pad_token_id))
            )
        return metrics

    def _generation_samples(self, batch: DataProto, reward_tensor: torch.Tensor, limit: int) -> list[dict]:
        """Up to ``limit`` rows of a scored validation batch as {input, output, score} text."""
        if limit <= 0:
            return []
        b = batch.batch
        rows = range(min(limit, len(batch)))
        prompt_mask = b["attention_mask"][:, : b["prompts"].shape[1]].bool()
        decode = self.tokenizer.decode
        return [
            {
                "input": decode(b["prompts"][i][prompt_mask[i]], skip_special_tokens=True),
                "output": decode(b["responses"][i][b["response_mask"][i].bool()], skip_special_tokens=True),
                "score": float(reward_tensor[i].sum()),
            }
            for i in rows
        ]

    def _dump_generations(self, batch: DataProto, folder: str | None, append: bool = False) -> None:
        """verl's ``trainer.rollout_data_dir`` / ``validation_data_dir``: every sample of the step as a JSON line
        (input, output, score, step, and the reward function's extra fields) in ``<folder>/<step>.jsonl``."""
        if not folder:
            return
        folder = os.path.expanduser(folder)
        os.makedirs(folder, exist_ok=True)
        samples = self._generation_samples(batch, batch.batch["token_level_scores"], limit=len(batch))
        extra_keys = [k for k in batch.meta_info.get("reward_extra_keys", []) if k in batch.non_tensor_batch]
        with open(os.path.join(folder, f"{self.global_steps}.jsonl"), "a" if append else "w") as f:
            for i, sample in enumerate(samples):
                extra = {k: _json_value(batch.non_tensor_batch[k][i]) for k in extra_keys}
                f.write(json.dumps({**sample, "step": self.global_steps, **extra}) + "\n")

    def _write_val_generations(self, samples: list[dict]) -> None:
        """``trainer.log_val_generations``: the first N validation samples of each validation, appended as JSON lines
        to ``<default_local_dir>/val_generations.jsonl`` (one line per sample, with the step)."""
        root = self._checkpoint_root()
        os.makedirs(root, exist_ok=True)
        with open(os.path.join(root, "val_generations.jsonl"), "a") as f:
            for sample in samples:
                f.write(json.dumps({"step": self.global_steps, **sample}) + "\n")

    # ---------------------------------------------------------------- checkpoints
    def _checkpoint_root(self) -> str:
        return os.path.abspath(os.path.expanduser(self.config.trainer.default_local_dir))

    def _save_checkpoint(self) -> str:
        """``global_step_N/{actor,critic}/`` + ``data.pt``, written to a temp dir and renamed: all or nothing."""
        root = self._checkpoint_root()
        final = os.path.join(root, f"global_step_{self.global_steps}")
        tmp = final + ".tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        self.actor_rollout_wg.save_checkpoint(os.path.join(tmp, "actor"))
        if self.use_critic:
            self.critic_wg.save_checkpoint(os.path.join(tmp, "critic"))
        torch.save(
            {
                "global_steps": self.global_steps,
                "dataloader": self.train_loader.state_dict(),
                "python_rng": random.getstate(),
                "numpy_rng": np.random.get_state(),
                "torch_rng": torch.get_rng_state(),
                "kl_ctrl": vars(self.kl_ctrl_in_reward) if self.kl_ctrl_in_reward is not None else None,
            },
            os.path.join(tmp, "data.pt"),
        )
        shutil.rmtree(final, ignore_errors=True)
        os.replace(tmp, final)
        latest = os.path.join(root, "latest_checkpointed_iteration.txt")
        with open(latest + ".tmp", "w") as f:
            f.write(str(self.global_steps))
        os.replace(latest + ".tmp", latest)
        self._prune_checkpoints(root)
        return final

    def _prune_checkpoints(self, root: str) -> None:
        """Keep the checkpoint just written and the newest ``keep - 1`` before it (``keep`` = the smaller of the
        actor/critic limits that are set). Higher-numbered checkpoints left by an abandoned run (one restarted with
        ``resume_mode=disable``, or resumed from an older path) are not this run's history: they are left alone,
        with a warning, and never displace the checkpoint just saved."""
        t = self.config.trainer
        limits = [k for k in (t.max_actor_ckpt_to_keep, t.max_critic_ckpt_to_keep) if k is not None and k > 0]
        if not limits:
            return
        keep = min(limits)
        steps = sorted(
            int(d.split("_")[-1])
            for d in os.listdir(root)
            if d.startswith("global_step_") and d.split("_")[-1].isdigit()
        )
        older = [s for s in steps if s < self.global_steps]
        for step in older[: max(len(older) - (keep - 1), 0)]:
            shutil.rmtree(os.path.join(root, f"global_step_{step}"), ignore_errors=True)
        newer = [s for s in steps if s > self.global_steps]
        if newer and not getattr(self, "_warned_newer_ckpts", False):
            self._warned_newer_ckpts = True
            logger.warning(
                "%s holds checkpoints of later steps %s from an earlier run; they are not pruned and not resumed "
                "from (latest_checkpointed_iteration.txt names step %d). Delete them if they are not needed.",
                root,
                newer,
                self.global_steps,
            )

    def _find_resume_dir(self) -> str | None:
        t = self.config.trainer
        if t.resume_mode == "disable":
            return None
        if t.resume_mode == "resume_path":
            if not t.resume_from_path or not os.path.isdir(os.path.expanduser(t.resume_from_path)):
                raise FileNotFoundError(
                    f"trainer.resume_from_path={t.resume_from_path!r} is not a checkpoint directory"
                )
            path = os.path.abspath(os.path.expanduser(t.resume_from_path))
            if not os.path.isfile(os.path.join(path, "data.pt")):
                steps = sorted(d for d in os.listdir(path) if d.startswith("global_step_") and "." not in d)
                hint = (
                    f"it looks like a run directory: give one of its checkpoints ({path}/{steps[-1]}), or "
                    f"trainer.resume_mode=auto trainer.default_local_dir={path}"
                    if steps
                    else "a checkpoint directory is global_step_N/ holding data.pt and actor/"
                )
                raise FileNotFoundError(f"trainer.resume_from_path={t.resume_from_path!r} is not a checkpoint: {hint}")
            return path
        if t.resume_mode != "auto":
            raise ValueError(f"trainer.resume_mode={t.resume_mode!r}: use auto, disable or resume_path")
        latest = os.path.join(self._checkpoint_root(), "latest_checkpointed_iteration.txt")
        if not os.path.isfile(latest):
            return None
        step = open(latest).read().strip()
        path = os.path.join(self._checkpoint_root(), f"global_step_{step}")
        if not os.path.isdir(path):  # starting over silently would overwrite the run's history
            raise FileNotFoundError(
                f"{latest} names step {step!r} but {path} does not exist. Resume from another checkpoint with "
                "trainer.resume_mode=resume_path trainer.resume_from_path=<dir>, or start over with "
                "trainer.resume_mode=disable."
            )
        return path

    def _load_checkpoint(self) -> None:
        path = self._find_resume_dir()
        if path is None:
            return
        self.actor_rollout_wg.load_checkpoint(os.path.join(path, "actor"))
        if self.use_critic:
            self.critic_wg.load_checkpoint(os.path.join(path, "critic"))
        state = torch.load(os.path.join(path, "data.pt"), weights_only=False)
        self.global_steps = int(state["global_steps"])
        self.train_loader.load_state_dict(state["dataloader"])
        random.setstate(state["python_rng"])
        np.random.set_state(state["numpy_rng"])
        torch.set_rng_state(state["torch_rng"])
        if self.kl_ctrl_in_reward is not None and state.get("kl_ctrl"):
            vars(self.kl_ctrl_in_reward).update(state["kl_ctrl"])
        print(f"resumed from {path} at step {self.global_steps}")


def uses_reference_policy(config) -> bool:
    enable = config.actor_rollout_ref.ref.enable
    if enable is not None:
        return bool(enable)
    return bool(config.actor_rollout_ref.actor.use_kl_loss or config.algorithm.use_kl_in_reward)


def uses_critic(config) -> bool:
    enable = config.critic.enable
    return bool(enable) if enable is not None else config.algorithm.adv_estimator in CRITIC_ESTIMATORS


def _json_value(value: Any) -> Any:
    """A reward field's value as JSON can hold it: numpy scalars as Python numbers, anything else unknown as text."""
    if isinstance(value, np.generic):
        value = value.item()
    if value is None or isinstance(value, (bool, int, float, str)):
        return value if not (isinstance(value, float) and value != value) else None
    return str(value)


def _finite_numbers(values) -> list[float]:
    """The numeric entries of a reward field as floats; NaN (a sample whose scoring call failed) and non-numbers
    left out."""
    return [float(v) for v in values if isinstance(v, (int, float, bool, np.number)) and v == v]


def _whole_groups_for_workers(num_groups: int, n: int, world_size: int) -> int:
    """The most whole groups of ``n`` rows, at most ``num_groups``, whose rows split evenly over ``world_size``."""
    groups = num_groups
    while groups > 0 and (groups * n) % world_size:
        groups -= 1
    return groups


def _concat_filling_extras(parts: list[DataProto]) -> DataProto:
    """``DataProto.concat`` of generation batches whose reward extra columns may differ (a column a scorer never
    returned in one batch): the missing entries become NaN instead of failing the step."""
    parts = [p for p in parts if len(p)]
    keys = dict.fromkeys(k for p in parts for k in p.non_tensor_batch)
    for p in parts:
        for k in keys:
            if k not in p.non_tensor_batch:
                p.non_tensor_batch[k] = np.full(len(p), np.nan, dtype=object)
    return DataProto.concat(parts)


def _filter_groups(batch: DataProto, metric: str, n: int) -> tuple[DataProto, int]:
    """DAPO dynamic sampling: keep prompt groups whose ``metric`` varies (all-equal groups carry no signal)."""
    if metric in ("seq_reward", "seq_final_reward"):
        values = batch.batch["token_level_scores"].sum(-1).tolist()
    elif metric in batch.non_tensor_batch:
        values = [float(v) for v in batch.non_tensor_batch[metric]]
    else:
        raise KeyError(f"algorithm.filter_groups.metric={metric!r} is neither seq_reward nor a reward extra field")
    by_uid: dict[str, list[float]] = defaultdict(list)
    for uid, v in zip(batch.non_tensor_batch["uid"], values):
        by_uid[uid].append(v)
    keep_uids = {u for u, vs in by_uid.items() if np.std(vs) > 0 or len(vs) == 1}
    mask = np.array([u in keep_uids for u in batch.non_tensor_batch["uid"]])
    return batch[torch.from_numpy(mask)], len(keep_uids)


def _with_mini_batch_rows(batch: DataProto, ppo_mini_batch_size: int) -> DataProto:
    """``batch`` (same tensors) whose meta_info says how many rows one optimizer mini-batch holds."""
    rows = ppo_mini_batch_size * batch.meta_info.get("rollout_n", 1)
    return DataProto(
        batch=batch.batch,
        non_tensor_batch=batch.non_tensor_batch,
        meta_info={**batch.meta_info, "mini_batch_rows": rows},
    )


def _copy_prompts(prompts: DataProto) -> DataProto:
    """A shallow copy (new dicts, shared tensors) of a caller's prompt batch, so the step's in-place edits (uid,
    popped keys) never reach it."""
    return DataProto(
        batch=dict(prompts.batch or {}),
        non_tensor_batch=dict(prompts.non_tensor_batch),
        meta_info=dict(prompts.meta_info),
    )


PROMPT_SIDE_KEYS = ("prompts", "input_ids", "attention_mask", "position_ids")


def concat_left_padded(batches: list[DataProto], pad_token_id: int) -> DataProto:
    """Concatenate generation outputs whose prompt widths differ: the prompt side of ``prompts``, ``input_ids``,
    ``attention_mask`` and ``position_ids`` is left-padded to the widest (pad id, mask 0, position 0)."""
    if len(batches) == 1:
        return batches[0]
    widths = [b.batch["prompts"].shape[1] for b in batches]
    width = max(widths)
    padded = []
    for b, w in zip(batches, widths):
        if w < width:
            b = DataProto(batch=dict(b.batch), non_tensor_batch=dict(b.non_tensor_batch), meta_info=dict(b.meta_info))
            for key in PROMPT_SIDE_KEYS:
                if key in b.batch:
                    t = b.batch[key]
                    fill = pad_token_id if key in ("prompts", "input_ids") else 0
                    pad = torch.full((t.shape[0], width - w), fill, dtype=t.dtype)
                    b.batch[key] = torch.cat([pad, t], dim=1)
        padded.append(b)
    return DataProto.concat(padded)


def _append(history: dict[str, list], metrics: dict[str, float], step: int) -> None:
    for k, v in metrics.items():
        if isinstance(v, (int, float)):
            history[k].append((step, v))
