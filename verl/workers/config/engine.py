"""How a role's model is sharded and placed: the ``fsdp_config`` sections (FSDP2 with ``trainer.backend=ray``)."""

from __future__ import annotations

from dataclasses import dataclass, field

from verl.base_config import BaseConfig

__all__ = ["FSDPEngineConfig", "MixedPrecisionConfig"]


@dataclass
class MixedPrecisionConfig(BaseConfig):
    """FSDP2's compute and gradient-reduction dtypes."""

    param_dtype: str | None = None  # compute dtype: null = bf16 on cuda, fp32 on cpu
    reduce_dtype: str = "fp32"  # gradient reduce-scatter dtype


@dataclass
class FSDPEngineConfig(BaseConfig):
    """FSDP2 sharding of one role's model (``trainer.backend=ray``; the local backend holds whole models)."""

    param_offload: bool = False  # CUDA: keep parameter shards on CPU between uses (no-op on CPU)
    optimizer_offload: bool = False  # CUDA: optimizer state and step on CPU (no-op on CPU)
    reshard_after_forward: bool = True  # free gathered weights after each forward (less memory, more comms)
    mixed_precision: MixedPrecisionConfig = field(default_factory=MixedPrecisionConfig)  # FSDP2 dtypes
    grad_offload: bool = False  # older verl key: no effect
    offload_policy: bool = False  # FSDP2 CPUOffloadPolicy: use param_offload / optimizer_offload here
    fsdp_size: int = -1  # -1: shard over all workers (the only layout here; other values warn)
    forward_prefetch: bool = False  # no effect
    model_dtype: str = "fp32"  # no effect: the model loads in its role's model.dtype
