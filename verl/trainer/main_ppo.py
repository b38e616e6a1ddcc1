"""The main job: PPO-family RL (GRPO, PPO with GAE, RLOO, REINFORCE++, ReMax, DAPO, ...).

    python -m verl.trainer.main_ppo                                  # GRPO on built-in addition, shipped warm start
    python -m verl.trainer.main_ppo algorithm.adv_estimator=gae      # PPO with a critic
    python -m verl.trainer.main_ppo actor_rollout_ref.model.path=/models/Qwen2.5-0.5B-Instruct \\
        data.train_files=~/data/gsm8k/train.parquet data.val_files=~/data/gsm8k/test.parquet

Builds the workers for the configured backend, the reward functions and the datasets, then hands them to the
controller (``RayPPOTrainer.fit``). ``build_trainer`` stops before ``fit``: the Python API (``verl.trainer.api``)
drives the same controller through it.
"""

from __future__ import annotations

import logging
import os
from typing import Any

from verl.planner.check import check_memory, validation_rows
from verl.sandbox.local import SandboxUnavailable
from verl.single_controller.base import WorkerGroupError
from verl.trainer.config.data import RLDataConfig
from verl.trainer.config.ppo_trainer import PPOTrainerConfig
from verl.trainer.ppo.choices import check_data_sources, check_registered_choices
from verl.trainer.ppo.code_isolation import resolve_code_isolation
from verl.trainer.ppo.ray_trainer import RayPPOTrainer
from verl.trainer.ppo.reward import manager_settings, reward_manager_class
from verl.trainer.ppo.roles import build_resource_pool_manager, build_role_worker_mapping
from verl.trainer.ppo.rollout_correction import configure_bypass_mode
from verl.trainer.ppo.v1 import check_trainer_mode
from verl.utils.cli import job_config, run_cli
from verl.utils.config import as_section, to_container, to_yaml
from verl.utils.cpu_threads import apply_job_threads
from verl.utils.dataset.rl_dataset import build_dataset, total_training_steps  # noqa: F401 (importable from here)
from verl.utils.disk import DiskFullError
from verl.utils.model import import_external_lib, load_tokenizer
from verl.utils.ported_keys import warn_ported_keys
from verl.utils.ppo_config import check_ppo_config as check_config
from verl.utils.torch_functional import enable_deterministic, set_seed
from verl.workers.reward_manager import load_custom_reward_function

logger = logging.getLogger(__name__)


def warn_unimplemented_choices(config: PPOTrainerConfig) -> list[str]:
    """One warning per ported verl key set to a value this version does not implement (what runs instead is named);
    returns them. The table: ``verl.utils.ported_keys.WARN_UNLESS``."""
    return warn_ported_keys(config)


def build_reward_fns(config: PPOTrainerConfig, tokenizer, compute_score=None):
    """Training and validation reward managers of the class the config names (``reward_model.reward_manager``: naive,
    batch, dapo, prime or one registered with ``@register``; ``reward_manager.source=importlib`` loads the class
    ``reward_manager.name`` from ``reward_manager.module.path``). ``compute_score`` (a Python function with verl's
    signature) takes the place of ``custom_reward_function`` when given."""
    if compute_score is None:
        compute_score = load_custom_reward_function(
            config.custom_reward_function.path, config.custom_reward_function.name
        )
    # verl passes custom_reward_function.reward_kwargs to the function; reward_model.reward_kwargs too
    kwargs: dict[str, Any] = {}
    for node in (config.reward_model.reward_kwargs, config.custom_reward_function.reward_kwargs):
        kwargs.update(to_container(node))
    manager_cls = reward_manager_class(config)
    kwargs.update(manager_settings(config, manager_cls))
    common = dict(tokenizer=tokenizer, compute_score=compute_score, reward_fn_key=config.data.reward_fn_key, **kwargs)
    return manager_cls(num_examine=0, **common), manager_cls(num_examine=0, **common)


def create_rl_dataset(data_paths, data_config, tokenizer, processor, is_train: bool = True, max_samples: int = -1):
    """verl's dataset builder: the prompts of ``data_paths`` under the ``data`` section ``data_config``."""
    from verl.utils.dataset.rl_dataset import RLHFDataset

    return RLHFDataset(data_paths, tokenizer, config=data_config, processor=processor, max_samples=max_samples)


def create_rl_sampler(data_config, dataset):
    """verl's sampler: a seeded random order when ``data.shuffle`` (``data.seed``, else 0), else the file order. The
    trainer itself orders prompts with the same rule (`PromptLoader`); this is for recipes that build a loader."""
    import torch

    data_config = as_section(data_config, RLDataConfig)  # verl's callers pass the data section or a dict of it
    if data_config.shuffle:
        seed = data_config.seed
        generator = torch.Generator().manual_seed(0 if seed is None else int(seed))
        return torch.utils.data.RandomSampler(dataset, generator=generator)
    return torch.utils.data.SequentialSampler(dataset)


def build_trainer(
    config: PPOTrainerConfig | Any,
    callbacks: list | None = None,
    compute_score=None,
    evaluators: dict[str, Any] | None = None,
    reward_hooks: list | None = None,
) -> RayPPOTrainer:
    """Everything ``run_ppo`` builds, up to the controller (not trained yet): checks the config, writes it to the
    run directory, loads the tokenizer, datasets, workers and reward functions. ``config``: the loaded
    ``PPOTrainerConfig`` (verl's ``DictConfig`` or a dict of its keys is loaded as overrides: ``as_section``).

    ``callbacks``: step callbacks (:mod:`verl.engine.callbacks`); each one's ``configure(config)`` runs first and may
    return a changed copy of the config to run with (e.g. the reference policy switched on). ``compute_score``: a reward function replacing
    ``custom_reward_function``. ``evaluators``: ``{name: evaluator}`` run on every validation
    (:mod:`verl.trainer.ppo.evaluators`). ``reward_hooks``: ``fn(reward_tensor) -> reward_tensor`` applied to the
    training scores."""
    config = as_section(config, PPOTrainerConfig)  # verl's ported keys were translated when it was loaded
    callbacks = list(callbacks or [])
    for cb in callbacks:
        if hasattr(cb, "configure"):
            config = cb.configure(config) or config
    check_config(config)
    check_trainer_mode(config)  # trainer.v1.trainer_mode: what an async mode needs, before any model loads
    apply_job_threads(config.trainer.num_threads)  # trainer.num_threads; warns when other processes hold the cores
    config = configure_bypass_mode(config)  # algorithm.rollout_correction.bypass_mode: the actor's loss
    warn_unimplemented_choices(config)
    set_seed(config.trainer.seed)
    if config.trainer.deterministic:
        enable_deterministic()  # this process; Ray workers turn it on themselves (VERL_DETERMINISTIC)
    out_dir = os.path.abspath(os.path.expanduser(config.trainer.default_local_dir))
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "config.yaml"), "w") as f:
        f.write(to_yaml(config))
    model_cfg = config.actor_rollout_ref.model
    import_external_lib(model_cfg.external_lib)  # may register estimators, losses, managers: checked next
    check_registered_choices(config)
    tokenizer = load_tokenizer(config.data.tokenizer or model_cfg.path, trust_remote_code=model_cfg.trust_remote_code)
    # the reward manager (a custom reward file may register it) is looked up before any prompt is read
    reward_fn, val_reward_fn = build_reward_fns(config, tokenizer, compute_score)
    train_ds = build_dataset(config, config.data.train_files, tokenizer)
    val_ds = build_dataset(config, config.data.val_files, tokenizer, key="data.val_files")
    datasets = {"data.train_files": train_ds, "data.val_files": val_ds}
    check_data_sources(config, datasets, compute_score, manager=reward_fn)
    resolve_code_isolation(config, datasets, compute_score)  # code answers or tools run here: isolated, or stop now
    if config.trainer.check_memory:  # before any model is read
        check_memory(config, validation_rows=validation_rows(config, val_ds))
    roles = build_role_worker_mapping(config)
    pools = build_resource_pool_manager(config, roles)
    trainer = RayPPOTrainer(config, tokenizer, roles, pools, None, None, reward_fn, val_reward_fn, train_ds, val_ds)
    trainer.init_workers()
    trainer.callbacks.extend(callbacks)
    trainer.evaluators.update(evaluators or {})
    trainer.reward_hooks.extend(reward_hooks or [])
    return trainer


FINAL_EVALS = 3  # evaluations averaged in the held-out line that ends a run


def run_ppo(config: PPOTrainerConfig | Any, callbacks: list | None = None, **build_kwargs: Any) -> dict[str, Any]:
    """Build everything from ``config`` and train; returns the controller's result (last validation, history).

    ``callbacks`` are step callbacks (:class:`verl.engine.StepCallback`: ``on_rewards``, ``on_advantages``,
    ``on_validation``, ``on_step_end``; returning False from the last stops the run). ``build_kwargs`` go to
    :func:`build_trainer` (``compute_score``, ``evaluators``, ``reward_hooks``)."""
    trainer = build_trainer(config, callbacks, **build_kwargs)
    try:
        result = trainer.fit()
    except WorkerGroupError as e:
        raise WorkerGroupError(f"{e}. {trainer.checkpoints.resume_hint()}") from e
    finally:
        trainer.shutdown()
    result["prompts_filtered"] = trainer.train_dataset.num_filtered
    result["trainer"] = trainer
    return result


def main(argv: list[str] | None = None) -> dict[str, Any]:
    config = job_config("ppo_trainer", argv, "verl.trainer.main_ppo", __doc__)
    if config is None:  # --help or --cfg job: printed, nothing to run
        return None
    result = run_ppo(config)
    history = result["history"].get("val-core/acc", [])
    if history and config.trainer.val_only:
        step, acc = history[-1]
        print(f"held-out greedy accuracy: {acc:.1%} at step {step} (trainer.val_only: no training)")
    elif history:
        print(f"{held_out_summary(history)} ({config.algorithm.adv_estimator}, {config.trainer.default_local_dir})")
    return result


def held_out_summary(history: list[tuple[int, float]], last: int = FINAL_EVALS) -> str:
    """The run's held-out line: the first evaluation, then where the run ended as the mean of the ``last``
    evaluations after it (one greedy evaluation moves by several points from the next), with the last one."""
    s0, a0 = history[0]
    tail = history[1:][-last:]
    if not tail:
        return f"held-out greedy accuracy: {a0:.1%} at step {s0}"
    mean = sum(acc for _, acc in tail) / len(tail)
    s1, a1 = tail[-1]
    if len(tail) == 1:
        return f"held-out greedy accuracy: {a0:.1%} at step {s0} -> {a1:.1%} at step {s1}"
    return (
        f"held-out greedy accuracy: {a0:.1%} at step {s0} -> {mean:.1%} (mean of the last {len(tail)} "
        f"evaluations, steps {tail[0][0]}-{s1}; {a1:.1%} at step {s1})"
    )


if __name__ == "__main__":
    run_cli(
        main, extra_errors=(WorkerGroupError, ImportError, DiskFullError, SandboxUnavailable)
    )  # a full disk: one line, the fix
