"""Evaluation, two ways.

Held-out greedy accuracy of any local HF model directory on a task:

    python -m verl.trainer.main_eval model.path=outputs/.../global_step_600 data.val_files=builtin://arithmetic/test

Offline scoring of a file of generated responses (public verl's ``main_eval``; ``main_generation`` writes such a file):

    python -m verl.trainer.main_eval data.path=outputs/generation/responses.parquet

In file mode each response is scored by the row's scorer (or ``custom_reward_function``); ``test_score/<data_source>``
is the mean over rows of each row's mean score, as in verl, and ``pass@n/<data_source>`` the share of rows with at
least one response scoring >= 1. A scoring call that raises scores ``0`` and is counted in ``errors`` (the first
message is kept): one bad response never stops the evaluation.
"""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any

from verl.sandbox.local import SandboxUnavailable, set_default_isolation
from verl.trainer.config.evaluation import EvaluationConfig
from verl.utils.cli import job_config, run_cli
from verl.utils.config import as_section
from verl.utils.dataset.parquet import get_nested, read_parquet_rows
from verl.utils.evaluation import evaluate_greedy_accuracy, score_to_float
from verl.utils.model import load_causal_lm, load_tokenizer
from verl.workers.reward_manager import load_custom_reward_function


def evaluate_model(
    model_path: str,
    val_files,
    max_new_tokens: int = 32,
    batch_size: int = 256,
    max_samples: int = -1,
    dtype: str = "fp32",
) -> dict[str, Any]:
    tokenizer = load_tokenizer(model_path)
    model = load_causal_lm(model_path, dtype=dtype)
    rows = read_parquet_rows(val_files)
    if not rows:
        raise ValueError(f"data.val_files={val_files}: no rows to evaluate")
    if max_samples > 0:
        rows = rows[:max_samples]
    return evaluate_greedy_accuracy(model, tokenizer, rows, max_new_tokens, batch_size)


def score_generations(
    path: str,
    response_key: str = "responses",
    data_source_key: str = "data_source",
    reward_model_key: str = "reward_model",
    compute_score=None,
    max_samples: int = -1,
) -> dict[str, Any]:
    """Score every response of the parquet file at ``path``; see the module docstring for the metrics."""
    if compute_score is None:
        from verl.utils.reward_score import default_compute_score as compute_score
    rows = read_parquet_rows(path, required_columns=[response_key, data_source_key, reward_model_key])
    if not rows:
        raise ValueError(f"data.path={path}: no rows to score")
    if max_samples > 0:
        rows = rows[:max_samples]
    row_means: dict[str, list[float]] = defaultdict(list)
    row_pass: dict[str, list[bool]] = defaultdict(list)
    errors, first_error, num_responses = 0, None, 0
    for row in rows:
        responses = row.data[response_key]
        if isinstance(responses, str):
            responses = [responses]
        if not isinstance(responses, (list, tuple)) or not responses:
            raise ValueError(
                f"{row.where}: column {response_key!r} holds {responses!r}; expected a non-empty list of response "
                "texts (main_generation writes one) or one text"
            )
        source = row.data[data_source_key]
        truth = get_nested(row, f"{reward_model_key}.ground_truth")
        scores = []
        for response in responses:
            try:
                scores.append(score_to_float(compute_score(source, response, truth, row.data.get("extra_info"))))
            except SandboxUnavailable:
                raise  # the machine cannot run code answers safely: no score means anything
            except Exception as e:  # a user's scorer may raise anything: count it, score 0, go on
                errors += 1
                first_error = first_error or f"{row.where}: {type(e).__name__}: {e}"
                scores.append(0.0)
        num_responses += len(scores)
        row_means[source].append(sum(scores) / len(scores))
        row_pass[source].append(max(scores) >= 1.0)
    result: dict[str, Any] = {"num_rows": len(rows), "num_responses": num_responses, "errors": errors}
    for source, means in row_means.items():
        result[f"test_score/{source}"] = sum(means) / len(means)
        result[f"pass@n/{source}"] = sum(row_pass[source]) / len(row_pass[source])
    if first_error:
        result["first_error"] = first_error
    return result


def run_eval(config: EvaluationConfig | Any) -> dict[str, Any]:
    config = as_section(config, EvaluationConfig)  # verl's DictConfig or a dict of its keys: loaded as overrides
    set_default_isolation(config.sandbox.isolation)  # code-task answers are run in the sandbox to be scored
    if config.data.path:
        d = config.data
        compute_score = load_custom_reward_function(
            config.custom_reward_function.path, config.custom_reward_function.name
        )
        result = score_generations(
            d.path, d.response_key, d.data_source_key, d.reward_model_key, compute_score, d.max_samples
        )
        if config.output.path:
            with open(config.output.path, "w") as f:
                json.dump(result, f, indent=2, default=str)
        return result
    result = evaluate_model(
        config.model.path,
        config.data.val_files,
        config.generation.max_new_tokens,
        config.generation.batch_size,
        config.data.max_samples,
        config.model.dtype,
    )
    if config.output.path:
        with open(config.output.path, "w") as f:
            json.dump(result, f, indent=2, default=str)
    return result


def main(argv: list[str] | None = None) -> dict[str, Any]:
    config = job_config("evaluation", argv, "verl.trainer.main_eval", __doc__)
    if config is None:  # --help or --cfg job: printed, nothing to run
        return None
    result = run_eval(config)
    if config.data.path:
        scores = {k: round(v, 4) for k, v in result.items() if k.startswith(("test_score/", "pass@n/"))}
        print(f"{scores} ({result['num_responses']} responses in {result['num_rows']} rows of {config.data.path})")
        if result["errors"]:
            print(f"{result['errors']} scoring calls failed (scored 0); the first: {result['first_error']}")
        return result
    print(
        f"held-out greedy accuracy: {result['acc']:.1%} ({result['num_samples']} problems from "
        f"{config.data.val_files}) for {config.model.path}"
    )
    return result


if __name__ == "__main__":
    run_cli(main, extra_errors=(SandboxUnavailable,))
