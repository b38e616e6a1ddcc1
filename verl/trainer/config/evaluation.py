"""The schema of ``python -m verl.trainer.main_eval``: score a file of generated responses offline (``data.path``, as
public verl's main_eval), or measure a model directory's held-out greedy accuracy on a task's data."""

from __future__ import annotations

from dataclasses import dataclass, field

from verl.base_config import BaseConfig
from verl.trainer.config.sandbox import CodeSandboxConfig

__all__ = ["EvaluationConfig"]


@dataclass
class EvalModelConfig(BaseConfig):
    """The model evaluated in model mode."""

    path: str = "builtin://tiny-qwen2-arith-sft"  # any local HF model directory
    dtype: str = "fp32"  # fp32 | bf16


@dataclass
class EvalDataConfig(BaseConfig):
    """What is scored: a generated file (file mode) or held-out prompts (model mode)."""

    path: str | None = None  # a parquet of generated responses: score it (no model is loaded)
    prompt_key: str = "prompt"  # (file mode) the prompt column, kept for ported configs
    response_key: str = "responses"  # (file mode) the column with each row's list of responses (or one text)
    data_source_key: str = "data_source"  # (file mode) the column that picks each row's scorer
    reward_model_key: str = "reward_model"  # (file mode) the column holding {ground_truth: ...}
    # (model mode) parquet files or builtin:// task specs
    val_files: list[str] = field(default_factory=lambda: ["builtin://arithmetic/test"])
    max_samples: int = -1  # -1: every row


@dataclass
class EvalRewardFunctionConfig(BaseConfig):
    """A scoring function of your own."""

    path: str | None = None  # a .py file defining the scoring function (null: the built-in rule scorers)
    name: str = "compute_score"  # fn(data_source, solution_str, ground_truth, extra_info=None)


@dataclass
class EvalGenerationConfig(BaseConfig):
    """Greedy decoding in model mode."""

    max_new_tokens: int = 32  # greedy decoding budget per prompt
    batch_size: int = 256  # prompts per generation call


@dataclass
class EvalOutputConfig(BaseConfig):
    """Where the result goes."""

    path: str | None = None  # write the metrics (and sample responses) as JSON here


@dataclass
class EvaluationConfig(BaseConfig):
    """Offline scoring of a generated file, or a model directory's held-out accuracy."""

    model: EvalModelConfig = field(default_factory=EvalModelConfig)  # model mode: the model
    data: EvalDataConfig = field(default_factory=EvalDataConfig)  # the rows scored
    custom_reward_function: EvalRewardFunctionConfig = field(default_factory=EvalRewardFunctionConfig)  # your scorer
    generation: EvalGenerationConfig = field(default_factory=EvalGenerationConfig)  # model mode: decoding
    output: EvalOutputConfig = field(default_factory=EvalOutputConfig)  # the JSON result
    sandbox: CodeSandboxConfig = field(default_factory=CodeSandboxConfig)  # isolation of code-task answers scored here


DERIVED_DEFAULTS: dict[str, str] = {}
