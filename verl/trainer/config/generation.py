"""The schema of batch generation (``python -m verl.trainer.main_generation``): ``data.n_samples`` responses to every
prompt of a parquet file, written as a new parquet with a ``responses`` column. Key names follow public verl's
generation config; its engine keys are accepted and change nothing with the HF sampler."""

from __future__ import annotations

from dataclasses import dataclass, field

from verl.base_config import BaseConfig
from verl.workers.config import FSDPEngineConfig, RolloutConfig

__all__ = ["GenerationJobConfig"]


@dataclass
class GenerationTrainerConfig(BaseConfig):
    """Where generation runs."""

    nnodes: int = 1  # accepted for ported scripts: generation runs in this one process
    n_gpus_per_node: int = 1  # accepted for ported scripts: generation runs in this one process
    device: str = "cpu"  # cpu | cuda


@dataclass
class GenerationDataConfig(BaseConfig):
    """The prompts and the output file."""

    path: str = "builtin://arithmetic/test"  # a parquet/JSONL file (verl's columns) or builtin://<task>/<split>
    prompt_key: str = "prompt"  # column holding the chat messages (or a plain string)
    n_samples: int = 1  # responses per prompt
    output_path: str = "outputs/generation/responses.parquet"  # the input rows plus `responses` (written atomically)
    batch_size: int = 128  # prompts per generation call (the samples do not depend on it)
    trust_remote_code: bool = False  # allow the model directory's own tokenizer code


@dataclass
class GenerationModelConfig(BaseConfig):
    """The model that samples."""

    path: str = "builtin://tiny-qwen2-arith-sft"  # any local HF model directory
    external_lib: str | None = None  # a module imported before the model loads (custom architectures)
    trust_remote_code: bool = False  # allow the model directory's own modelling code
    dtype: str = "fp32"  # fp32 | bf16


@dataclass
class GenerationActorConfig(BaseConfig):
    """verl's actor keys in generation configs (accepted for ported scripts)."""

    strategy: str = "fsdp"  # accepted for ported scripts: no effect
    ulysses_sequence_parallel_size: int = 1  # accepted for ported scripts: no effect
    fsdp_config: FSDPEngineConfig = field(default_factory=FSDPEngineConfig)  # accepted for ported scripts: no effect


@dataclass
class GenerationRayInitConfig(BaseConfig):
    """verl's Ray keys in generation configs."""

    num_cpus: int | None = None  # accepted for ported scripts: no Ray cluster is started


@dataclass
class GenerationJobConfig(BaseConfig):
    """Batch generation to parquet."""

    trainer: GenerationTrainerConfig = field(default_factory=GenerationTrainerConfig)  # placement
    data: GenerationDataConfig = field(default_factory=GenerationDataConfig)  # prompts in, responses out
    model: GenerationModelConfig = field(default_factory=GenerationModelConfig)  # the sampling model
    # the sampler (data.n_samples sets the responses per prompt; rollout.n is accepted for ported scripts)
    rollout: RolloutConfig = field(
        default_factory=lambda: RolloutConfig(
            n=1,
            temperature=1.0,  # verl's: the trainer's 0.5 is a training default, not a sampling one
            prompt_length=512,
            response_length=64,
            tensor_model_parallel_size=1,
            log_prob_micro_batch_size_per_gpu=8,
        )
    )  # the sampler (data.n_samples sets the responses per prompt; rollout.n is accepted for ported scripts)
    actor: GenerationActorConfig = field(default_factory=GenerationActorConfig)  # accepted for ported scripts
    ray_init: GenerationRayInitConfig = field(default_factory=GenerationRayInitConfig)  # accepted for ported scripts
    seed: int = 0  # sampling seed: same seed, same responses (whatever data.batch_size is)


DERIVED_DEFAULTS: dict[str, str] = {"model.trust_remote_code": "data.trust_remote_code"}
