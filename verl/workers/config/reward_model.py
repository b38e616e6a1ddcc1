"""The reward section (``reward_model``): a reward model, the reward manager and reward shaping."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from verl.base_config import BaseConfig
from verl.utils.profiler.config import ProfilerConfig
from verl.workers.config.model import RewardModelModelConfig
from verl.workers.config.rollout import RolloutConfig

__all__ = ["OverlongBufferConfig", "RewardModelConfig", "SandboxFusionConfig"]


@dataclass
class SandboxFusionConfig(BaseConfig):
    """A SandboxFusion server that runs code answers for verl's code-dataset scorers."""

    # the service's /run_code URL (SandboxFusion, or python -m verl.sandbox.server): code data sources run their
    # test cases there; null: in the local sandbox (verl.sandbox)
    url: str | None = None
    max_concurrent: int = 64  # requests in flight to the service, across scoring threads
    memory_limit_mb: int = 1024  # per program, sent with each request


@dataclass
class OverlongBufferConfig(BaseConfig):
    """DAPO's soft overlong penalty."""

    enable: bool = False  # penalise responses in the last `len` tokens before max_response_length
    len: int = 8  # the buffer: the penalty grows linearly over these last tokens
    penalty_factor: float = 1.0  # the penalty at max_response_length
    # reward_manager=dapo given this section as its overlong_buffer_cfg (verl's recipe): log the penalty in the
    # reward's extra info (overlong_reward, overlong); no effect on the trainer's own penalty
    log: bool = False


@dataclass
class RewardModelConfig(BaseConfig):
    """Scores: an optional sequence-classification reward model, the rule/custom reward manager and shaping."""

    enable: bool = False  # score with a sequence-classification model as well as rules
    model: RewardModelModelConfig = field(default_factory=RewardModelModelConfig)  # the reward model
    # responses per RM forward (null: the deprecated micro_batch_size, else this default with a warning)
    micro_batch_size_per_gpu: int | None = 64
    enable_resource_pool: bool = False  # ray: the reward model on its own processes (else colocated)
    nnodes: int = 1  # with enable_resource_pool: the RM's own nodes
    n_gpus_per_node: int = 1  # with enable_resource_pool: the RM's processes per node
    reward_manager: str = "naive"  # registered manager: naive | batch | dapo | prime | one added with @register
    # extra keyword arguments passed to the scoring function
    reward_kwargs: dict[str, Any] = field(default_factory=dict)
    error_score: float = 0.0  # score given to a sample whose reward function raised or returned NaN/None
    # DAPO overlong-response penalty
    overlong_buffer: OverlongBufferConfig = field(default_factory=OverlongBufferConfig)
    strategy: str = "fsdp"  # no effect: the reward model runs in the data-parallel worker
    # deprecated in verl: sets reward_model.micro_batch_size_per_gpu = it // workers
    micro_batch_size: int | None = None
    use_dynamic_bsz: bool = False  # no effect: fixed micro-batches
    forward_max_token_len_per_gpu: int = 32768  # no effect
    max_length: int | None = None  # no effect: responses are scored whole
    ulysses_sequence_parallel_size: int = 1  # not implemented (> 1 warns)
    # score in a background thread while the log-prob and value passes run (joined before the advantages; not with
    # DAPO's filter_groups or ReMax, which need the scores at once): same scores, the waits overlap
    launch_reward_fn_async: bool = False
    # no effect: the scores are computed in the controller's reward stage (reward_model.reward_manager)
    use_reward_loop: bool = True
    # scoring threads of the naive manager: > 1 overlaps scorers that wait on a process or a server (code in
    # the sandbox, SandboxFusion); a pure-Python scorer gains nothing (one interpreter lock)
    num_workers: int = 1
    reward_loop_source: str = "register"  # no effect: register | importlib (see use_reward_loop)
    # a custom reward-loop class file: not loaded in this version (a value is an error)
    reward_loop_module_path: str | None = None
    reward_loop_class_name: str | None = None  # no effect (see reward_loop_source)
    # a SandboxFusion service for code-dataset scores (default: the local sandbox)
    sandbox_fusion: SandboxFusionConfig = field(default_factory=SandboxFusionConfig)
    profiler: ProfilerConfig = field(default_factory=ProfilerConfig)  # profiling: not wired (enable=true warns)
    # a generative reward model's inference engine: not implemented (the reward model is a sequence classifier here;
    # these keys have no effect)
    rollout: RolloutConfig = field(default_factory=RolloutConfig)
