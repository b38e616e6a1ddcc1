"""Held-out task accuracy: greedy decoding of each prompt, scored by the task's rule scorer."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import Any

import torch

from verl.utils.dataset.parquet import Row, get_nested, prompt_to_messages, render_prompt


@torch.no_grad()
def greedy_generate(model, tokenizer, prompts: Sequence[str], max_new_tokens: int, batch_size: int = 256) -> list[str]:
    """Greedy continuations of ``prompts`` (already chat-templated text) with HF ``generate`` and its KV cache."""
    was_training = model.training
    model.eval()
    old_side = tokenizer.padding_side
    tokenizer.padding_side = "left"
    outputs: list[str] = []
    try:
        for start in range(0, len(prompts), batch_size):
            enc = tokenizer(
                list(prompts[start : start + batch_size]), return_tensors="pt", padding=True, add_special_tokens=False
            ).to(model.device)
            out = model.generate(
                **enc,
                max_new_tokens=max_new_tokens,
                do_sample=False,
                pad_token_id=tokenizer.pad_token_id,
                eos_token_id=tokenizer.eos_token_id,
            )
            outputs.extend(tokenizer.batch_decode(out[:, enc["input_ids"].shape[1] :], skip_special_tokens=True))
    finally:
        tokenizer.padding_side = old_side
        model.train(was_training)
    return outputs


def score_to_float(result: Any) -> float:
    """A scorer returns a float or a dict with ``score``."""
    if isinstance(result, dict):
        return float(result["score"])
    return float(result)


def evaluate_greedy_accuracy(
    model,
    tokenizer,
    rows: Sequence[Row],
    max_new_tokens: int = 32,
    batch_size: int = 256,
    compute_score: Callable[..., Any] | None = None,
) -> dict[str, Any]:
    """Greedy-decode every row's prompt and score it. Returns ``acc`` (score >= 1), ``score`` (mean), per data source
    ``acc/<data_source>``, and the first few ``samples`` (prompt, response, ground truth, score) for inspection."""
    if not rows:
        raise ValueError("evaluation: no rows to score (an empty validation file?)")
    if batch_size < 1:
        raise ValueError(f"evaluation: batch_size={batch_size} must be >= 1 (generation.batch_size)")
    if compute_score is None:
        from verl.utils.reward_score import default_compute_score as compute_score
    prompts = [render_prompt(tokenizer, prompt_to_messages(get_nested(r, "prompt"), r), r.where) for r in rows]
    responses = greedy_generate(model, tokenizer, prompts, max_new_tokens, batch_size)
    per_source: dict[str, list[float]] = defaultdict(list)
    scores, samples = [], []
    for row, prompt, response in zip(rows, prompts, responses):
        truth = get_nested(row, "reward_model.ground_truth")
        source = row.data.get("data_source", "unknown")
        score = score_to_float(compute_score(source, response, truth, row.data.get("extra_info")))
        scores.append(score)
        per_source[source].append(float(score >= 1.0))
        if len(samples) < 5:
            samples.append({"prompt": prompt, "response": response, "ground_truth": truth, "score": score})
    n = max(1, len(scores))
    result: dict[str, Any] = {
        "acc": sum(s >= 1.0 for s in scores) / n,
        "score": sum(scores) / n,
        "num_samples": len(scores),
        "samples": samples,
    }
    for source, hits in per_source.items():
        result[f"acc/{source}"] = sum(hits) / len(hits)
    return result
