"""The schema of the PPO-family main job (``python -m verl.trainer.main_ppo``): every key, its type, default and
meaning. Key names follow public verl; docs/ppo.md explains each group and docs/config_reference.md lists them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from verl.base_config import BaseConfig
from verl.trainer.config.algorithm import AlgoConfig
from verl.trainer.config.async_training import AsyncTrainingConfig, StandaloneRolloutConfig, V1TrainerConfig
from verl.trainer.config.config import RewardManagerConfig
from verl.trainer.config.data import RLDataConfig
from verl.trainer.config.sandbox import CodeSandboxConfig
from verl.utils.profiler.config import GlobalProfilerConfig
from verl.workers.config import ActorRolloutRefConfig, FSDPCriticConfig, RewardModelConfig
from verl.workers.config.reward_model import SandboxFusionConfig

__all__ = [
    "CustomRewardFunctionConfig",
    "PPOTrainerConfig",
    "RayInitConfig",
    "RayKwargsConfig",
    "TrainerConfig",
    "TransferQueueConfig",
]


@dataclass
class CustomRewardFunctionConfig(BaseConfig):
    """A reward function of your own, in verl's signature."""

    path: str | None = None  # a .py file defining the function below
    name: str = "compute_score"  # fn(data_source, solution_str, ground_truth, extra_info=None, **kw)
    # keyword arguments passed to the custom reward function (with reward_model.reward_kwargs)
    reward_kwargs: dict[str, Any] = field(default_factory=dict)


@dataclass
class CollapseGuardConfig(BaseConfig):
    """When a run counts as collapsed (verl.trainer.ppo.collapse_guard): a signal far below the run's own best."""

    enable: bool = True  # report a collapse in one line and count it (collapse/detected, collapse/count)
    val_metric: str = "val-core/acc"  # the held-out metric watched
    val_drop: float = 0.15  # held-out below its best by more than this
    train_drop: float = 0.2  # mean training reward (critic/score/mean) over the window below its best by more
    window: int = 5  # steps in the training-reward mean
    entropy_ratio: float = 0.0  # actor/entropy below this x its first value (0: not watched)


@dataclass
class LrPlateauConfig(BaseConfig):
    """Cut the learning rate when the held-out metric stops improving (verl.trainer.ppo.collapse_guard), as
    PyTorch's ReduceLROnPlateau does, on ``trainer.collapse_guard.val_metric`` at each validation."""

    enable: bool = False  # at each validation (trainer.test_freq): a stalled held-out metric cuts the rate
    patience: int = 2  # validations in a row without a new best (by more than threshold) before a cut
    threshold: float = 0.0  # a new best must beat the old one by more than this (absolute)
    factor: float = 0.5  # the learning rate's factor at each cut
    min_scale: float = 0.05  # no cut below this x the configured rate
    rollback: bool = True  # each cut first reloads the policy of the best validation
    initial_scale: float = 1.0  # the run starts at this x the configured rate ...
    growth: float = 1.0  # ... and each new best multiplies it by this, up to 1x (1: never raised)

    def __post_init__(self):
        if self.patience < 1:
            raise ValueError(f"trainer.lr_plateau.patience={self.patience}: must be >= 1 validation")
        if not 0.0 < self.factor < 1.0:
            raise ValueError(f"trainer.lr_plateau.factor={self.factor}: must be in (0, 1)")
        if not 0.0 < self.min_scale <= 1.0:
            raise ValueError(f"trainer.lr_plateau.min_scale={self.min_scale}: must be in (0, 1]")
        if not self.min_scale <= self.initial_scale <= 1.0:
            raise ValueError(
                f"trainer.lr_plateau.initial_scale={self.initial_scale}: must be within [min_scale "
                f"({self.min_scale}), 1]"
            )
        if self.growth < 1.0:
            raise ValueError(f"trainer.lr_plateau.growth={self.growth}: must be >= 1 (1: the rate is never raised)")


@dataclass
class TrainerConfig(BaseConfig):
    """The run: its length, validation and checkpoint cadence, loggers, seed, backend and devices."""

    project_name: str = "verl_examples"  # names the run directory (and W&B/MLflow project)
    experiment_name: str = "gsm8k"  # names the run directory (and the W&B/MLflow run)
    # metrics, config, checkpoints
    default_local_dir: str = "checkpoints/${trainer.project_name}/${trainer.experiment_name}"
    total_epochs: int = 30  # used when total_training_steps is null
    # overrides total_epochs when set
    total_training_steps: int | None = field(default=None, metadata={"api": ("train.total_steps",)})
    val_before_train: bool = True  # validate once before the first step (step 0)
    test_freq: int = -1  # -1 disables
    save_freq: int = -1  # -1 disables; the last step is saved too when > 0
    resume_mode: str = "auto"  # auto | disable | resume_path
    resume_from_path: str | None = None  # a global_step_N directory (resume_mode=resume_path)
    max_actor_ckpt_to_keep: int | None = None  # keep the newest N checkpoints (null: all)
    max_critic_ckpt_to_keep: int | None = None  # as max_actor_ckpt_to_keep (the smaller applies)
    critic_warmup: int = 0  # steps that train only the critic before the actor starts
    balance_batch: bool = True  # ray: give every worker a similar token count (in each mini-batch)
    # console | file | tensorboard | wandb | mlflow
    logger: list[str] = field(default_factory=lambda: ["console", "file"])
    log_val_generations: int = 0  # append the first N validation samples to val_generations.jsonl
    # one seed for data order, sampling, init and shuffles: same seed, same run on CPU
    seed: int = field(default=1, metadata={"api": ("train.seed",)})
    # torch's deterministic algorithms in every process (GPU kernels too; an op without one is an error naming it).
    # CPU runs are bit-exact without it (docs/ppo.md#reproducibility)
    deterministic: bool = False
    # before any model is read: the memory planner's estimate of the run's peak per device (docs/auto_config.md)
    # against the device's free memory; a run that would not fit stops with the planner's numbers
    check_memory: bool = False
    backend: str = "local"  # local: one process | ray: Ray actor worker groups, FSDP2 (docs/scaling.md)
    device: str = "cpu"  # cpu (gloo) | cuda (NCCL)
    # cpu: glibc keeps freed buffers for the next pass instead of page-faulting them back in
    cpu_retain_freed_memory: bool = True
    # torch threads of this process (the whole job on backend=local, the controller on ray): null keeps
    # OMP_NUM_THREADS when set, else the cores this process may use (affinity mask, cgroup quota; docs/cpu_threads.md)
    num_threads: int | None = None
    nnodes: int = 1  # nodes (trainer.backend=ray)
    n_gpus_per_node: int = 1  # worker processes per node (on cpu: processes sharing the cores)
    val_only: bool = False  # true: run the validation once and stop (no training)
    collapse_guard: CollapseGuardConfig = field(default_factory=CollapseGuardConfig)  # say when a run collapses
    # on a collapse, reload the policy of the best validation (kept in <default_local_dir>/best_val/) and scale the
    # learning rate by rollback_lr_factor
    rollback_on_collapse: bool = False
    rollback_lr_factor: float = 0.5  # the learning rate's factor at each rollback
    lr_plateau: LrPlateauConfig = field(default_factory=LrPlateauConfig)  # cut the rate when held-out stalls
    # a folder: every training sample of step N (input, output, score, reward fields) in N.jsonl
    rollout_data_dir: str | None = None
    validation_data_dir: str | None = None  # a folder: every validation sample at step N in N.jsonl
    # HDFS copies are not made (a value warns; checkpoints stay in default_local_dir)
    default_hdfs_dir: str | None = None
    del_local_ckpt_after_load: bool = False  # no effect: the local checkpoint is kept after a resume
    use_legacy_worker_impl: str = "auto"  # no effect: one worker implementation
    ray_wait_register_center_timeout: int = 300  # no effect: workers report to the controller directly
    profile_steps: list[int] | None = None  # no effect: profiling is not wired (benchmarks/ has the profiling scripts)
    # extra seconds of margin before a capacity reservation expires (MLP_/SAGEMAKER_CURRENT_CAPACITY_BLOCK_EXPIRATION_
    # TIMESTAMP): with save_freq > 0 a checkpoint is saved when the next step and a save would not fit before it
    esi_redundant_time: int = 0
    # older verl key: nsys options of the controller process (no effect: profiling is not wired)
    controller_nsight_options: dict[str, Any] = field(default_factory=dict)
    # older verl key: nsys options of the worker processes (no effect: profiling is not wired)
    worker_nsight_options: dict[str, Any] = field(default_factory=dict)
    # older verl key: Ascend NPU profiler options (no effect: profiling is not wired)
    npu_profile: dict[str, Any] = field(default_factory=dict)
    use_v1: bool = True  # verl's switch to its V1 trainer: here one trainer, whose loop trainer.v1.trainer_mode picks
    v1: V1TrainerConfig = field(default_factory=V1TrainerConfig)  # sync or asynchronous training (docs/async.md)


@dataclass
class RayInitConfig(BaseConfig):
    """The Ray cluster of ``trainer.backend=ray``."""

    address: str | None = None  # null: start a local cluster inside the run directory; auto | <ip>:6379
    num_cpus: int | None = None  # logical CPUs of a local cluster (null: max(cores, workers))
    num_threads_per_worker: int | None = None  # torch threads per worker process (null: cores / processes per node)
    dist_timeout_s: int = 600  # collective timeout of the worker process group
    timeline_json_file: str | None = None  # no effect: no Ray timeline is written


@dataclass
class RayKwargsConfig(BaseConfig):
    """verl's newer home of the Ray settings (``ray_kwargs``); this version reads them into ``ray_init``."""

    # keyword arguments of ray.init: address and num_cpus set ray_init.address / ray_init.num_cpus; others warn
    ray_init: dict[str, Any] = field(default_factory=dict)
    timeline_json_file: str | None = None  # sets ray_init.timeline_json_file (no Ray timeline is written: warns)


@dataclass
class TransferQueueConfig(BaseConfig):
    """verl's TransferQueue: batches streamed between roles through a data service."""

    enable: bool = False  # not implemented (true warns): batches travel between roles as DataProto


@dataclass
class RewardConfig(BaseConfig):
    """Newer verl's ``reward`` section, read where it is set: ``reward.sandbox_fusion.*`` and ``reward.num_workers``
    mean what ``reward_model.sandbox_fusion.*`` and ``reward_model.num_workers`` do (setting both to different
    values is an error naming them)."""

    sandbox_fusion: SandboxFusionConfig = field(default_factory=SandboxFusionConfig)  # as reward_model.sandbox_fusion
    num_workers: int | None = None  # as reward_model.num_workers (null: that one)


@dataclass
class PPOTrainerConfig(BaseConfig):
    """PPO-family RL. Batch sizes: ``data.train_batch_size`` and ``ppo_mini_batch_size`` count prompts (each gets
    ``rollout.n`` responses); ``*_micro_batch_size_per_gpu`` count responses."""

    data: RLDataConfig = field(default_factory=RLDataConfig)  # prompts
    actor_rollout_ref: ActorRolloutRefConfig = field(default_factory=ActorRolloutRefConfig)  # the policy's roles
    critic: FSDPCriticConfig = field(default_factory=FSDPCriticConfig)  # the value model (PPO with GAE)
    reward_model: RewardModelConfig = field(default_factory=RewardModelConfig)  # reward model and reward shaping
    # your reward function
    custom_reward_function: CustomRewardFunctionConfig = field(default_factory=CustomRewardFunctionConfig)
    algorithm: AlgoConfig = field(default_factory=AlgoConfig)  # estimator, KL, dynamic sampling
    trainer: TrainerConfig = field(default_factory=TrainerConfig)  # the run
    ray_init: RayInitConfig = field(default_factory=RayInitConfig)  # trainer.backend=ray
    reward_manager: RewardManagerConfig = field(default_factory=RewardManagerConfig)  # which reward manager scores
    reward: RewardConfig = field(default_factory=RewardConfig)  # newer verl's spelling of reward_model's scoring keys
    global_profiler: GlobalProfilerConfig = field(default_factory=GlobalProfilerConfig)  # profiling: not wired
    transfer_queue: TransferQueueConfig = field(default_factory=TransferQueueConfig)  # streamed batches
    ray_kwargs: RayKwargsConfig = field(default_factory=RayKwargsConfig)  # verl's newer Ray settings (-> ray_init)
    sandbox: CodeSandboxConfig = field(default_factory=CodeSandboxConfig)  # isolation of model-written code run here
    # verl's one-step-off and fully-async entry points: their settings, mapped onto trainer.v1 (docs/async.md)
    async_training: AsyncTrainingConfig = field(default_factory=AsyncTrainingConfig)
    rollout: StandaloneRolloutConfig = field(default_factory=StandaloneRolloutConfig)  # standalone rollout resources
    # ours: the named recipe applied under the overrides (verl/trainer/config/recipes/<name>.yaml, or a YAML path);
    # null: quickstart when no model and no data are given (or only builtin:// ones), else none. none: no recipe
    recipe: str | None = None


# The recipe a run gets when it names none and trains a built-in model on built-in data (docs/recipes.md).
DEFAULT_RECIPE = "quickstart"
# The shipped recipes written for this job (recipe=<name>).
RECIPES = ("quickstart",)
# A run that sets one of these to a path of its own is the user's task: verl's defaults, no recipe.
USER_TASK_KEYS = ("actor_rollout_ref.model.path", "data.train_files", "data.val_files")

_MACHINE = "the machine: one CPU process by default (verl assumes 8 GPUs); set it for yours"
_MICRO = (
    "verl's null stops a run that sets neither this nor use_dynamic_bsz; 128 runs, and micro-batching (gradient "
    "accumulation) leaves the math as it is"
)
_NO_EFFECT = "accepted, no effect here (its null means verl's value)"
_ROLLOUT_DTYPE = "fp32: bf16 sampling on a CPU without bf16 units is slow and less exact; set bf16 where it is fast"
# Keys verl has whose default differs here on purpose, each with the reason (docs/config_reference.md shows them;
# tests/trainer/config/test_verl_defaults.py fails on any other difference from verl's defaults).
VERL_DEFAULT_EXCEPTIONS: dict[str, str] = {
    "actor_rollout_ref.actor.strategy": "dp: the in-process worker; fsdp is FSDP2 on trainer.backend=ray",
    "actor_rollout_ref.ref.strategy": "follows actor.strategy",
    "critic.strategy": "as actor.strategy",
    "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu": _MICRO,
    "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu": _MICRO,
    "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu": _MICRO,
    "critic.ppo_micro_batch_size_per_gpu": _MICRO,
    "critic.forward_micro_batch_size_per_gpu": _MICRO,
    "reward_model.micro_batch_size_per_gpu": _MICRO,
    "actor_rollout_ref.rollout.name": "hf: the built-in sampler, always installed (verl makes you choose)",
    "actor_rollout_ref.rollout.mode": "sync: the hybrid engine in the trainer's process (async: agent-loop servers)",
    "actor_rollout_ref.rollout.dtype": _ROLLOUT_DTYPE,
    "actor_rollout_ref.rollout.enforce_eager": "vllm's CPU build runs eagerly (no CUDA graphs)",
    "actor_rollout_ref.rollout.load_format": "vllm in the hybrid engine: random start, the actor's weights synced",
    "reward_model.rollout.name": "as actor_rollout_ref.rollout.name",
    "reward_model.rollout.dtype": _ROLLOUT_DTYPE,
    "reward_model.rollout.load_format": "as actor_rollout_ref.rollout.load_format",
    "reward_model.rollout.max_num_seqs": "the RolloutConfig default (verl gives this section its own)",
    "reward_model.rollout.skip_tokenizer_init": "the RolloutConfig default (no effect: the hf sampler)",
    "reward_model.rollout.prompt_length": "the RolloutConfig default (a generative reward model sets its own)",
    "reward_model.rollout.response_length": "the RolloutConfig default (a generative reward model sets its own)",
    "reward_model.model.path": "null: no reward model (verl's placeholder names a model a new user lacks)",
    "reward_model.model.input_tokenizer": "null: the policy's tokenizer (verl's interpolation of the same)",
    "reward_model.n_gpus_per_node": _MACHINE,
    "reward_model.nnodes": _MACHINE,
    "trainer.n_gpus_per_node": _MACHINE,
    "trainer.device": _MACHINE,
    "trainer.logger": "console + file (metrics.jsonl, read by the tuner and tools); wandb needs an account",
    "actor_rollout_ref.actor.optim.min_lr_ratio": _NO_EFFECT,
    "critic.optim.min_lr_ratio": _NO_EFFECT,
    "actor_rollout_ref.actor.fsdp_config.wrap_policy.min_num_params": _NO_EFFECT,
    "actor_rollout_ref.ref.fsdp_config.wrap_policy.min_num_params": _NO_EFFECT,
    "critic.model.fsdp_config.wrap_policy.min_num_params": _NO_EFFECT,
    "reward_model.model.fsdp_config.wrap_policy.min_num_params": _NO_EFFECT,
    "actor_rollout_ref.rollout.engine_kwargs.vllm": _NO_EFFECT,
    "actor_rollout_ref.rollout.engine_kwargs.sglang": _NO_EFFECT,
    "actor_rollout_ref.rollout.engine_kwargs.trtllm": _NO_EFFECT,
    "algorithm.pf_ppo.reweight_method": _NO_EFFECT,
    "algorithm.pf_ppo.weight_pow": _NO_EFFECT,
    "actor_rollout_ref.actor.profiler.save_path": _NO_EFFECT,
    "actor_rollout_ref.ref.profiler.save_path": _NO_EFFECT,
    "actor_rollout_ref.rollout.profiler.save_path": _NO_EFFECT,
    "critic.profiler.save_path": _NO_EFFECT,
    "reward_model.profiler.save_path": _NO_EFFECT,
}


# Keys whose default is another key's value (a ${...} interpolation, resolved when the config loads): set either.
DERIVED_DEFAULTS: dict[str, str] = {
    "actor_rollout_ref.actor.use_fused_kernels": "actor_rollout_ref.model.use_fused_kernels",
    "actor_rollout_ref.actor.checkpoint.load_contents": "actor_rollout_ref.actor.checkpoint.save_contents",
    "actor_rollout_ref.ref.log_prob_use_dynamic_bsz": "actor_rollout_ref.actor.use_dynamic_bsz",
    "actor_rollout_ref.ref.log_prob_max_token_len_per_gpu": "actor_rollout_ref.actor.ppo_max_token_len_per_gpu",
    "actor_rollout_ref.ref.strategy": "actor_rollout_ref.actor.strategy",
    "actor_rollout_ref.ref.ulysses_sequence_parallel_size": "actor_rollout_ref.actor.ulysses_sequence_parallel_size",
    "actor_rollout_ref.ref.use_torch_compile": "actor_rollout_ref.actor.use_torch_compile",
    "actor_rollout_ref.rollout.prompt_length": "data.max_prompt_length",
    "actor_rollout_ref.rollout.response_length": "data.max_response_length",
    "actor_rollout_ref.rollout.log_prob_use_dynamic_bsz": "actor_rollout_ref.actor.use_dynamic_bsz",
    "actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu": "actor_rollout_ref.actor.ppo_max_token_len_per_gpu",
    "critic.model.path": "actor_rollout_ref.model.path",
    "critic.model.tokenizer_path": "actor_rollout_ref.model.path",
    "critic.model.external_lib": "actor_rollout_ref.model.external_lib",
    "critic.model.trust_remote_code": "actor_rollout_ref.model.trust_remote_code",
    "critic.ppo_mini_batch_size": "actor_rollout_ref.actor.ppo_mini_batch_size",
    "critic.ppo_epochs": "actor_rollout_ref.actor.ppo_epochs",
    "critic.loss_agg_mode": "actor_rollout_ref.actor.loss_agg_mode",
    "critic.use_dynamic_bsz": "actor_rollout_ref.actor.use_dynamic_bsz",
    "critic.forward_max_token_len_per_gpu": "critic.ppo_max_token_len_per_gpu",
    "critic.checkpoint.load_contents": "critic.checkpoint.save_contents",
    "reward_model.use_dynamic_bsz": "critic.use_dynamic_bsz",
    "reward_model.forward_max_token_len_per_gpu": "critic.forward_max_token_len_per_gpu",
    "reward_model.model.external_lib": "actor_rollout_ref.model.external_lib",
    "reward_model.model.use_fused_kernels": "actor_rollout_ref.model.use_fused_kernels",
    "actor_rollout_ref.actor.rollout_n": "actor_rollout_ref.rollout.n",
    "actor_rollout_ref.ref.rollout_n": "actor_rollout_ref.rollout.n",
    "critic.rollout_n": "actor_rollout_ref.rollout.n",
    "actor_rollout_ref.actor.use_remove_padding": "actor_rollout_ref.model.use_remove_padding",
    "critic.forward_micro_batch_size": "critic.ppo_micro_batch_size",
    "critic.forward_micro_batch_size_per_gpu": "critic.ppo_micro_batch_size_per_gpu",
    "actor_rollout_ref.rollout.profiler.enable": "actor_rollout_ref.actor.profiler.enable",
    "actor_rollout_ref.rollout.prometheus.served_model_name": "actor_rollout_ref.model.path",
    "data.tool_config_path": "actor_rollout_ref.rollout.multi_turn.tool_config_path",
    "reward_manager.name": "reward_model.reward_manager",
}
