"""The PPO-family controller: one program holds the algorithm's dataflow and drives the role workers.

The class keeps verl's name (``RayPPOTrainer``) so ported scripts find it, but it knows nothing of processes: it
calls worker-group methods (``generate_sequences``, ``compute_log_prob``, ``update_actor``, ...) on whatever backend
built them (``verl.trainer.ppo.roles``). ``fit`` loops ``step``; ``step`` is the dataflow as the papers draw it:

    generate -> compute_reward -> compute_old_log_prob -> apply_rollout_correction -> compute_ref_log_prob
             -> compute_values -> compute_advantage -> update_critic -> update_actor

Step callbacks (:mod:`verl.engine.callbacks`) run at ``on_rewards`` (before advantages), ``on_advantages`` (before
the updates), ``on_validation`` and ``on_step_end``; evaluators add ``eval/<name>_*`` metrics to each validation.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import torch
from tqdm import tqdm

from verl import core_algos
from verl.core_algos import AdvantageEstimator  # noqa: F401 (verl's names, importable from here)
from verl.engine.callbacks import run_callbacks
from verl.protocol import DataProto
from verl.single_controller.base.decorator import with_mini_batch_rows
from verl.trainer.ppo import advantage, rollout_correction
from verl.trainer.ppo import reward as reward_stage
from verl.trainer.ppo.advantage import apply_kl_penalty, compute_advantage, compute_response_mask  # noqa: F401
from verl.trainer.ppo.checkpointing import RunCheckpoints, controller_state, restore_controller_state
from verl.trainer.ppo.collapse_guard import CollapseWatch
from verl.trainer.ppo.dynamic_sampling import sample_varied_groups
from verl.trainer.ppo.metric_utils import StepTimer, reduce_metrics, step_summary
from verl.trainer.ppo.old_log_prob import old_log_prob_source
from verl.trainer.ppo.reward import PROMPT_KEYS, compute_reward  # noqa: F401
from verl.trainer.ppo.roles import ResourcePoolManager, Role, init_workers, uses_critic, uses_reference_policy  # noqa: F401
from verl.trainer.ppo.run_log import RunLog
from verl.trainer.ppo.sample_log import dump_generations
from verl.trainer.ppo.v1 import ReplicaAgentLoop, SyncRounds, build_rollout_rounds, new_round
from verl.trainer.ppo.v1.off_policy import is_on_policy, off_policy_metrics, stamp_versions
from verl.trainer.ppo.validation import concat_left_padded, validate_policy
from verl.utils.dataset.rl_dataset import PromptLoader, build_dataset, total_training_steps
from verl.utils.ppo_config import as_ppo_config
from verl.utils.py_functional import value_or
from verl.workers.reward_manager import NaiveRewardManager


class RayPPOTrainer:
    """The controller, built as in verl: ``RayPPOTrainer(config, tokenizer, role_worker_mapping,
    resource_pool_manager, ...)``, ``init_workers()``, ``fit()`` (``main_ppo.build_trainer`` does all three)."""

    def __init__(
        self,
        config,
        tokenizer,
        role_worker_mapping: dict[Role, Any],
        resource_pool_manager: ResourcePoolManager,
        ray_worker_group_cls: type | None = None,
        processor=None,
        reward_fn=None,
        val_reward_fn=None,
        train_dataset=None,
        val_dataset=None,
        collate_fn=None,
        train_sampler=None,
        device_name: str | None = None,
    ):
        """Missing datasets come from ``data.train_files`` / ``val_files``, missing reward functions score rows by
        ``data_source``; ``ray_worker_group_cls``, ``processor``, ``collate_fn``, ``train_sampler``: for ported recipes."""
        self.config, self.tokenizer = (config := as_ppo_config(config, device_name)), tokenizer  # a DictConfig: loaded
        self.role_worker_mapping, self.resource_pool_manager = role_worker_mapping, resource_pool_manager
        d = config.data
        self.train_dataset = value_or(train_dataset, lambda: build_dataset(config, d.train_files, tokenizer))
        self.val_dataset = value_or(
            val_dataset, lambda: build_dataset(config, d.val_files, tokenizer, "data.val_files")
        )
        scorer = lambda: NaiveRewardManager(tokenizer, reward_fn_key=d.reward_fn_key)  # noqa: E731
        self.reward_fn, self.val_reward_fn = value_or(reward_fn, scorer), value_or(val_reward_fn, scorer)
        self.total_training_steps = total_training_steps(config, len(self.train_dataset))
        self.actor_rollout_wg = self.critic_wg = self.rm_wg = self.backend = None  # init_workers starts them
        alg = config.algorithm
        self.use_critic, self.use_rm = Role.Critic in role_worker_mapping, Role.RewardModel in role_worker_mapping
        self.use_reference_policy = uses_reference_policy(config)
        self.kl_ctrl_in_reward = core_algos.get_kl_controller(alg.kl_ctrl) if alg.use_kl_in_reward else None
        seed, pad = (d.seed if d.seed is not None else config.trainer.seed), tokenizer.pad_token_id
        self.train_loader = PromptLoader(self.train_dataset, d.train_batch_size, pad, d.shuffle, seed)
        self.checkpoints = RunCheckpoints(config.trainer)
        self.global_steps = 0
        self.callbacks: list = []  # step callbacks (see verl.engine); each sees the step's batch and metrics
        self.evaluators: dict[str, Any] = {}  # name -> evaluator, run on every validation (eval/<name>_*)
        self.reward_hooks: list = []  # fn(reward_tensor) -> reward_tensor, applied to training scores
        self._pending_scores = None  # launch_reward_fn_async: the step's scores, being computed
        self.collapse_watch = CollapseWatch(self)
        self.stop_reason: str | None = None
        self.last_val: dict[str, float] = {}
        self.metrics: dict[str, float] = {}  # the current step's metrics, filled by its stages
        self.timer = StepTimer()  # the current step's stage timings (timing_s/<stage>)
        self.run_log = RunLog(config, self.checkpoints.root, on_logged=self.checkpoints.commit)  # see save_checkpoint
        self._resumed = False
        self.policy_version = 0  # the actor's updates so far: version v sampled a batch when v updates preceded it
        self.sync_rounds = self.rollout_rounds = SyncRounds(lambda batch: self.rollout_wg.generate_sequences(batch))

    def init_workers(self) -> None:
        """Start every role's workers on ``trainer.backend`` and build their models (verl's name)."""
        args = (self.role_worker_mapping, self.resource_pool_manager, self.total_training_steps, self.tokenizer)
        handles, self.backend = init_workers(self.config, *args)
        self.actor_rollout_wg, self.critic_wg, self.rm_wg = (handles.get(h) for h in ("actor_rollout", "critic", "rm"))
        self.async_rollout_manager = handles.get("async_rollout_manager")  # verl's name: the agent loop, or None
        args = (self.config, self.actor_rollout_wg, self.total_training_steps, self.sync_rounds.generate)
        self.rollout_rounds = build_rollout_rounds(*args, handles.get("rollout_replica"))  # trainer.v1.trainer_mode
        self.async_rollout_manager = ReplicaAgentLoop.over(self) or self.async_rollout_manager  # separate_async

    @property
    def rollout_wg(self) -> Any:  # what generates: the agent loop (rollout.mode=async) or the actor's batch call
        return getattr(self, "async_rollout_manager", None) or self.actor_rollout_wg

    # ------------------------------------------------------------------------------------------------ the loop
    def init(self) -> None:
        """Resume from the latest checkpoint (once) and open the loggers; ``fit`` and ``train_step`` call it."""
        if not self._resumed:
            self.resume()
            self._resumed = True
        self.run_log.open(self.global_steps)  # a resumed run's metrics file: the steps after its checkpoint go

    def fit(self) -> dict[str, Any]:
        """Train until ``total_training_steps``; returns the last validation metrics and the metric history."""
        self.init()
        try:
            if self.config.trainer.val_only:  # verl's trainer.val_only: evaluate the policy as it is, stop
                if self.val_reward_fn is None:
                    raise ValueError("trainer.val_only=true needs validation data (data.val_files)")
                self.log(self.validate(), step=self.global_steps)
                return self.result()
            if self.config.trainer.val_before_train and self.val_reward_fn is not None and self.global_steps == 0:
                self.log(self.collapse_watch.observed(self.validate(), step=0), step=0)
            if self.global_steps >= self.total_training_steps:
                print(
                    f"already at step {self.global_steps} of {self.total_training_steps} in {self.checkpoints.root}: "
                    "nothing to do (raise trainer.total_training_steps, or trainer.resume_mode=disable to start over)"
                )
            with tqdm(total=self.total_training_steps, initial=self.global_steps, desc="ppo", disable=None) as bar:
                while self.global_steps < self.total_training_steps and self.stop_reason is None:
                    self.step()
                    bar.update(1)
            return self.result()
        finally:  # also when a step raises: the loggers are flushed and closed, checkpoints on disk stay as they are
            self.close()

    def train_step(self, prompts: DataProto | None = None) -> dict[str, float]:
        """One step of the loop ``fit`` runs, on ``prompts`` (left-padded ``input_ids``, ``attention_mask``,
        ``position_ids``) or, when None, on the next training batch. Validation and checkpoints happen at
        ``trainer.test_freq`` / ``save_freq`` as in ``fit``. Returns the step's metrics."""
        self.init()
        return self.step(prompts)

    def step(self, prompts: DataProto | None = None) -> dict[str, float]:
        """One iteration of the dataflow; returns its metrics (also logged and kept in ``history``)."""
        self.global_steps += 1
        self.metrics, self.timer = {}, StepTimer()
        with self.timer("step"):
            batch = self.generate_and_score(prompts)  # generate -> compute_reward (DAPO: until groups vary)
            batch = self.compute_old_log_prob(batch)
            batch = self.apply_rollout_correction(batch)  # mismatch metrics; importance weights, rejection
            batch = self.compute_ref_log_prob(batch)
            batch = self.compute_values(batch)
            batch = self.collect_reward(batch)  # reward_model.launch_reward_fn_async: the scores computed meanwhile
            dump_generations(batch, self.config.trainer.rollout_data_dir, self.global_steps, self.tokenizer)
            batch = self.compute_advantage(batch)
            self.update_critic(batch)
            self.update_actor(batch)
            self.maybe_validate()
            self.collapse_watch.after(self.global_steps, self.metrics, batch)  # before the save: a rollback is kept
            self.maybe_save_checkpoint()
        self.metrics.update(step_summary(batch, self.timer, self.backend, self.config.trainer, self.use_critic))
        self.metrics.update(self.rollout_rounds.pop_metrics())  # colocate_async: queue, idle and sync times
        stops = run_callbacks(self.callbacks, "on_step_end", self, batch, self.metrics)
        self.log(self.metrics, step=self.global_steps)
        if any(s is False for s in stops) and self.stop_reason is None:
            self.stop_reason = f"a step callback returned False at step {self.global_steps}"
        return self.metrics

    # ------------------------------------------------------------------------------------------------ the stages
    def generate_and_score(self, prompts: DataProto | None = None) -> DataProto:
        """``generate`` then ``compute_reward``; with DAPO dynamic sampling (``algorithm.filter_groups``), repeated on
        new prompts until ``train_batch_size`` groups have varied rewards (given ``prompts``: one round, those kept)."""
        fg, n = self.config.algorithm.filter_groups, self.config.actor_rollout_ref.rollout.n
        if not fg.enable:
            batch = self.compute_reward(self.generate(prompts))
        else:
            target = self.config.data.train_batch_size if prompts is None else len(prompts)
            rounds = fg.max_num_gen_batches if prompts is None else 1
            sample_round = lambda: self.compute_reward(self.generate(prompts))  # noqa: E731
            workers = self.config.trainer.n_gpus_per_node * self.config.trainer.nnodes  # the update's split
            batch, counts = sample_varied_groups(sample_round, fg.metric, n, target, rounds, workers)
            self.metrics.update(counts)
        # hints for data-parallel workers (ignored by local ones): balance tokens across workers, and split each
        # optimizer mini-batch evenly over them (verl.single_controller.base.decorator.dp_row_order)
        balance = self.config.trainer.balance_batch
        batch.meta_info.update(global_steps=self.global_steps, rollout_n=n, balance_batch=balance)
        return batch

    def generate(self, prompts: DataProto | None = None) -> DataProto:
        """``rollout.n`` responses to each prompt of the next training batch (or of ``prompts``): the prompts'
        columns, a fresh ``uid`` per prompt, and the sampled tokens."""
        n = self.config.actor_rollout_ref.rollout.n
        rounds = self.rollout_rounds if prompts is None else self.sync_rounds  # given prompts: generated now
        with self.timer("gen"):  # colocate_async: how long the trainer waited for a round generated meanwhile
            batch, gen_output, version = rounds.next_round(
                self.policy_version, lambda: new_round(self.train_loader, prompts, n)
            )
        for key, seconds in gen_output.meta_info.pop("timing", {}).items():  # e.g. the weight reshard (Ray)
            self.timer.add(key, seconds)
        batch = batch.repeat(n, interleave=True)
        batch.pop(batch_keys=PROMPT_KEYS)
        return stamp_versions(batch.union(gen_output), version)

    def compute_reward(self, batch: DataProto) -> DataProto:
        """Scores (reward model, reward function, hooks) as ``token_level_scores`` with DAPO's overlong penalty; for
        ReMax, the greedy baseline (``reward_baselines``)."""
        cfg = self.config
        if cfg.algorithm.adv_estimator == "remax":
            with self.timer("gen_max"):
                n = cfg.actor_rollout_ref.rollout.n
                generate, shaped = self.rollout_wg.generate_sequences, partial(reward_stage.shaped_score, cfg)
                baseline = reward_stage.compute_remax_baseline(batch, n, generate, self._score, shaped)
                batch.batch["reward_baselines"] = baseline
        elif cfg.reward_model.launch_reward_fn_async and not cfg.algorithm.filter_groups.enable:
            self._pending_scores = reward_stage.score_in_background(self._score, batch)  # collect_reward joins
            return batch
        with self.timer("reward"):
            scores = self._score(batch)
        return self._add_scores(batch, *scores)

    def collect_reward(self, batch: DataProto) -> DataProto:
        """The scores ``compute_reward`` left to a background thread (``reward_model.launch_reward_fn_async``),
        computed while the log-prob and value passes ran; ``timing_s/reward`` is the wait for them."""
        if self._pending_scores is None:
            return batch
        with self.timer("reward"):
            scores, self._pending_scores = self._pending_scores.result(), None
        return self._add_scores(batch, *scores)

    def compute_old_log_prob(self, batch: DataProto) -> DataProto:
        """``old_log_probs`` (and entropy): the sampler's (bypass mode), the on-policy update's, or this pass's."""
        with self.timer("old_log_prob"):
            on_policy = is_on_policy(batch, self.policy_version)  # colocate_async: an older version sampled it
            if (source := old_log_prob_source(self.config, len(batch), bool(self.callbacks), on_policy)) != "pass":
                return rollout_correction.bypass_old_log_probs(batch) if source == "rollout" else batch
            old = self.actor_rollout_wg.compute_log_prob(batch)
            entropy = old.batch.pop("entropys")
            mask, mode = batch.batch["response_mask"].float(), self.config.actor_rollout_ref.actor.loss_agg_mode
            self.metrics["actor/entropy"] = core_algos.agg_loss(entropy, mask, mode).item()
            return batch.union(old)

    def apply_rollout_correction(self, batch: DataProto) -> DataProto:
        """The sampler's log-probs against the old ones: mismatch metrics, and ``algorithm.rollout_correction``'s
        ``rollout_is_weights`` and rejection from ``response_mask`` (``verl.trainer.ppo.rollout_correction``)."""
        with self.timer("rollout_corr"):
            batch, metrics = rollout_correction.apply_rollout_correction(
                batch, self.config.algorithm.rollout_correction
            )
        self.metrics.update(metrics)
        return batch

    def compute_ref_log_prob(self, batch: DataProto) -> DataProto:
        """``ref_log_prob`` and, for callbacks, ``token_level_kl``: the ``algorithm.kl_penalty`` estimate per token."""
        if not self.use_reference_policy:
            return batch
        with self.timer("ref"):
            batch = batch.union(self.actor_rollout_wg.compute_ref_log_prob(batch))
            b = batch.batch
            if "old_log_probs" in b:  # a skipped on-policy pass: no callback reads token_level_kl
                kind = self.config.algorithm.kl_penalty.rstrip("+")
                kl = core_algos.kl_penalty(b["old_log_probs"], b["ref_log_prob"], kind)
                b["token_level_kl"] = kl.detach() * b["response_mask"].to(kl.dtype)
            return batch

    def compute_values(self, batch: DataProto) -> DataProto:
        """The critic's values of every response token (estimators that need them)."""
        if not self.use_critic:
            return batch
        with self.timer("values"):
            return batch.union(self.critic_wg.compute_values(batch))

    def compute_advantage(self, batch: DataProto) -> DataProto:
        """``token_level_rewards`` (scores / reward_temp, minus the KL penalty when it is in the reward), then
        ``advantages`` and ``returns`` of the configured estimator."""
        alg = self.config.algorithm
        with self.timer("adv"):
            batch, kl_metrics = advantage.compute_token_level_rewards(batch, alg, self.kl_ctrl_in_reward)
            self.metrics.update(kl_metrics)
            run_callbacks(self.callbacks, "on_rewards", self, batch, self.metrics)
            alg = self.config.algorithm  # a callback may have replaced the config (e.g. another gamma)
            batch = compute_advantage(batch, alg.adv_estimator, alg.gamma, alg.lam, alg.norm_adv_by_std_in_grpo, alg)
        run_callbacks(self.callbacks, "on_advantages", self, batch, self.metrics)
        return batch

    def update_critic(self, batch: DataProto) -> None:
        if not self.use_critic:
            return
        with self.timer("update_critic"):
            out = self.critic_wg.update_critic(with_mini_batch_rows(batch, self.config.critic.ppo_mini_batch_size))
        self.metrics.update(reduce_metrics(out.meta_info["metrics"]))

    def update_actor(self, batch: DataProto) -> None:
        if self.global_steps <= self.config.trainer.critic_warmup:
            return
        with self.timer("update_actor"):
            mini = self.config.actor_rollout_ref.actor.ppo_mini_batch_size
            out = self.actor_rollout_wg.update_actor(with_mini_batch_rows(batch, mini))
        self.metrics.update(off_policy_metrics(batch, self.policy_version))
        self.policy_version += 1
        self.metrics.update(reduce_metrics(out.meta_info["metrics"]))
        self.metrics.update(rollout_correction.mismatch_metrics_after_update(batch, out))  # a skipped old pass

    # ------------------------------------------------------------------------------------------------ stage parts
    def _score(self, batch: DataProto) -> tuple[torch.Tensor, dict[str, list]]:
        return reward_stage.score_batch(batch, self.reward_fn, self.rm_wg, self.reward_hooks)

    def _add_scores(self, batch: DataProto, reward_tensor: torch.Tensor, extra: dict[str, list]) -> DataProto:
        shaping = (self.config.reward_model.overlong_buffer, self.config.data.max_response_length)
        errors = reward_stage.add_scores(batch, reward_tensor, extra, *shaping)
        self.metrics["reward/errors"] = self.metrics.get("reward/errors", 0) + errors
        return batch

    # ------------------------------------------------------------------------------------------------ validation
    def maybe_validate(self) -> None:
        test_freq = self.config.trainer.test_freq
        if self.val_reward_fn is None or test_freq <= 0:
            return
        if self.global_steps == self.total_training_steps or self.global_steps % test_freq == 0:
            with self.timer("testing"):
                self.metrics.update(self.validate())

    def validate(self) -> dict[str, float]:
        """Validate now (``verl.trainer.ppo.validation``), run the evaluators and the ``on_validation`` callbacks;
        returns the metrics and remembers them as ``last_val``."""
        policy = (self.rollout_wg, self.val_reward_fn, self.global_steps, self.rm_wg)
        metrics, outputs = validate_policy(self.config, self.val_dataset, self.tokenizer, *policy)
        if self.evaluators:
            from verl.trainer.ppo.evaluators import run_evaluators

            batch = concat_left_padded(outputs, self.tokenizer.pad_token_id)
            metrics.update(run_evaluators(self.evaluators, self, batch))
        run_callbacks(self.callbacks, "on_validation", self, metrics)
        self.last_val = metrics
        return metrics

    # ------------------------------------------------------------------------------------------------ checkpoints
    def maybe_save_checkpoint(self) -> None:
        if self.checkpoints.due(self.global_steps, self.total_training_steps):  # save_freq, last step, ESI expiry
            with self.timer("save_checkpoint"):
                self.save_checkpoint(commit=False)  # committed once the step's metrics are logged

    def save_checkpoint(self, commit: bool = True) -> str:
        """``global_step_N/`` of this step (its path); ``commit=False``: resumed from once the step is logged."""
        state = controller_state(self.global_steps, self.train_loader, self.kl_ctrl_in_reward, self.collapse_watch)
        # colocate_async: the rounds in flight, finished first (the ahead engine's sampling state is the worker's)
        state.update(policy_version=self.policy_version, rounds=self.rollout_rounds.state_dict())
        return self.checkpoints.save(self.global_steps, self._checkpoint_roles(), state, commit)

    def resume(self) -> None:
        """Load the checkpoint ``trainer.resume_mode`` points at, if any."""
        path = self.checkpoints.find_resume_dir()
        if path is not None:  # a truncated or corrupt latest one: the newest earlier one that loads, reported
            path, state = self.checkpoints.load_first_readable(path, self._checkpoint_roles())
            watch = self.collapse_watch
            self.global_steps = restore_controller_state(state, self.train_loader, self.kl_ctrl_in_reward, watch)
            self.policy_version = state.get("policy_version", self.global_steps)  # older checkpoints: no warmup
            self.rollout_rounds.load_state_dict(state.get("rounds") or {})
            print(f"resumed from {path} at step {self.global_steps}")

    def _checkpoint_roles(self) -> dict[str, Any]:
        return {"actor": self.actor_rollout_wg, **({"critic": self.critic_wg} if self.use_critic else {})}

    # ------------------------------------------------------------------------------------------------ bookkeeping
    @property
    def history(self) -> dict[str, list]:
        """Every metric logged so far: ``{name: [(step, value), ...]}``."""
        return self.run_log.history

    def log(self, metrics: dict[str, float], step: int) -> None:
        self.run_log.log(metrics, step)

    def result(self) -> dict[str, Any]:
        return {"val": self.last_val, "history": dict(self.history), "global_steps": self.global_steps}

    def close(self) -> None:
        """Close the loggers (``init`` reopens them) once a round generated ahead is done; the workers stay."""
        self.rollout_rounds.drain()
        self.run_log.close()

    def shutdown(self) -> None:
        """Close the loggers and stop the backend's worker processes (Ray); the trainer is unusable after it."""
        self.close()
        self.rollout_rounds.shutdown()
        if self.backend is not None:
            self.backend.shutdown()
            self.backend = None
