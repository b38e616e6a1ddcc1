"""The critic section (``critic``): the value model of PPO with GAE."""

from __future__ import annotations

from dataclasses import dataclass, field

from verl.base_config import BaseConfig
from verl.trainer.config.config import CheckpointConfig
from verl.workers.config.model import FSDPCriticModelCfg
from verl.workers.config.optimizer import FSDPOptimizerConfig

__all__ = ["CriticConfig", "FSDPCriticConfig"]


@dataclass
class CriticConfig(BaseConfig):
    """The value model's updates: batch sizes, value clipping, loss aggregation, its optimizer and placement."""

    enable: bool | None = None  # null: when the estimator needs values (gae)
    # dp | fsdp | fsdp2: the data-parallel worker (FSDP2 with backend=ray); megatron is not implemented
    strategy: str = "dp"
    model: FSDPCriticModelCfg = field(default_factory=FSDPCriticModelCfg)  # the value model
    enable_resource_pool: bool = False  # ray: the critic on its own processes (else colocated with the actor)
    nnodes: int = 1  # with enable_resource_pool: the critic's own nodes
    n_gpus_per_node: int = 1  # with enable_resource_pool: the critic's processes per node
    optim: FSDPOptimizerConfig = field(default_factory=FSDPOptimizerConfig)  # the critic's AdamW (value head and body)
    ppo_mini_batch_size: int = 16  # prompts per critic optimizer step
    ppo_micro_batch_size_per_gpu: int = 128  # responses per forward/backward
    ppo_epochs: int = 1  # passes over each batch
    shuffle: bool = False  # shuffle rows before cutting mini-batches (seeded by the step)
    cliprange_value: float = 0.5  # value clipping around the old values
    loss_agg_mode: str = "token-mean"  # as the actor's
    # deprecated in verl: sets critic.ppo_micro_batch_size_per_gpu = it // workers
    ppo_micro_batch_size: int | None = None
    use_dynamic_bsz: bool = False  # no effect: the critic runs fixed micro-batches (same loss)
    ppo_max_token_len_per_gpu: int = 32768  # no effect (critic token budgets: see use_dynamic_bsz)
    forward_max_token_len_per_gpu: int = 32768  # no effect
    checkpoint: CheckpointConfig = field(default_factory=CheckpointConfig)  # what a checkpoint holds (verl key)


@dataclass
class FSDPCriticConfig(CriticConfig):
    """The critic of the data-parallel (FSDP2) worker."""

    grad_clip: float = 1.0  # max global gradient norm; a non-finite norm skips the optimizer step
    ulysses_sequence_parallel_size: int = 1  # Ulysses sequence parallelism: not implemented (> 1 warns)
