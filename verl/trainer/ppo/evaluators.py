"""Evaluators: extra metrics computed on every validation (docs/python_api.md, "Evaluators").

Register with ``trainer.add_evaluator(name, evaluator)`` (Python API) or ``RayPPOTrainer.evaluators[name] = ...``.
At each validation the controller calls ``evaluator.evaluate(trainer, batch)`` (or ``evaluator(trainer, batch)`` for
a plain function) once, where ``trainer`` is the controller (``RayPPOTrainer``: ``tokenizer``, ``actor_rollout_wg``,
``config``) and ``batch`` the validation ``DataProto`` with the greedy responses (``prompts``, ``responses``,
``response_mask``, ``attention_mask``, ``input_ids``, ``position_ids``, ``token_level_scores`` and the rows'
non-tensors). What it returns becomes metrics:

- a sequence of per-sample numbers (list, array, 1-d tensor) -> ``eval/<name>_mean`` and ``eval/<name>_std``;
- a mapping ``{key: number}`` -> ``eval/<name>_<key>`` each;
- one number -> ``eval/<name>``.

A NaN or inf value raises ``ValueError`` naming the evaluator.

Built-ins: :class:`ResponseLengthEvaluator`, :class:`LatencyEvaluator` (generation latency p50/p95 at a batch size),
:class:`ClassifierScoreEvaluator` (any local HF sequence-classification directory) and its alias
:class:`ToxicityEvaluator`.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from verl.protocol import DataProto


def run_evaluators(evaluators: Mapping[str, Any], trainer: Any, batch: DataProto) -> dict[str, float]:
    """Run each evaluator on ``batch`` and name its results ``eval/<name>_*`` (see the module docstring)."""
    metrics: dict[str, float] = {}
    for name, ev in evaluators.items():
        fn = ev.evaluate if hasattr(ev, "evaluate") else ev
        result = fn(trainer, batch)
        if isinstance(result, Mapping):
            values = {f"eval/{name}_{k}": v for k, v in result.items()}
        elif isinstance(result, (int, float)) and not isinstance(result, bool):
            values = {f"eval/{name}": result}
        else:
            arr = np.asarray(result.detach().cpu() if isinstance(result, torch.Tensor) else result, dtype=float)
            if arr.ndim != 1 or arr.size == 0:
                raise ValueError(
                    f"evaluator {name!r} ({type(ev).__name__}) returned shape {arr.shape}: return one number per "
                    "sample, a dict of numbers, or one number"
                )
            values = {f"eval/{name}_mean": arr.mean(), f"eval/{name}_std": arr.std()}
        for key, v in values.items():
            v = float(v)
            if not math.isfinite(v):
                raise ValueError(f"evaluator {name!r} ({type(ev).__name__}) returned {v} for {key!r}")
            metrics[key] = v
    return metrics


class ResponseLengthEvaluator:
    """Per-sample response length in generated tokens (EOS included) -> ``eval/<name>_mean``/``_std``."""

    def evaluate(self, trainer: Any, batch: DataProto) -> list[float]:
        return batch.batch["attention_mask"][:, -batch.batch["responses"].shape[1] :].sum(-1).float().tolist()


class LatencyEvaluator:
    """Wall-clock latency of the trainer's own rollout for a batch of ``batch_size`` prompts (seconds).

    Times ``num_batches`` calls of ``actor_rollout_wg.generate_sequences`` on ``batch_size`` validation prompts
    each (greedy, ``rollout.val_kwargs``, full ``response_length``), after ``warmup`` untimed calls, and returns
    ``{"p50", "p95", "mean"}`` -> ``eval/<name>_p50``, ``eval/<name>_p95``, ``eval/<name>_mean``. It measures the
    policy being trained, on this machine's rollout backend. ``model`` is accepted for the documented call
    (``LatencyEvaluator(model="llama3-8b", batch_size=4)``) and only recorded: a second model is never loaded.
    """

    def __init__(self, model: str | None = None, batch_size: int = 4, num_batches: int = 3, warmup: int = 1):
        if batch_size < 1 or num_batches < 1 or warmup < 0:
            raise ValueError(f"batch_size={batch_size}, num_batches={num_batches} must be >= 1, warmup >= 0")
        self.model, self.batch_size, self.num_batches, self.warmup = model, batch_size, num_batches, warmup

    def evaluate(self, trainer: Any, batch: DataProto) -> dict[str, float]:
        b = batch.batch
        width = b["prompts"].shape[1]
        idx = torch.arange(self.batch_size) % len(batch)  # wraps around a validation set smaller than batch_size
        prompts = DataProto.from_dict(
            {
                "input_ids": b["prompts"][idx],
                "attention_mask": b["attention_mask"][idx, :width],
                "position_ids": b["position_ids"][idx, :width],
            },
            meta_info={"validate": True},
        )
        times = []
        for i in range(self.warmup + self.num_batches):
            start = time.perf_counter()
            trainer.actor_rollout_wg.generate_sequences(prompts.select())
            if i >= self.warmup:
                times.append(time.perf_counter() - start)
        return {
            "p50": float(np.percentile(times, 50)),
            "p95": float(np.percentile(times, 95)),
            "mean": float(np.mean(times)),
        }


class ClassifierScoreEvaluator:
    """Probability of one label under a local HF sequence-classification model, per validation response.

    ``model``: any local ``AutoModelForSequenceClassification`` directory (loaded once, on first use). ``label``: the
    label's index or its name in ``config.id2label``; None takes label 0 of a one-logit model, else label 1 (the
    conventional positive class). Probabilities are ``sigmoid`` for one-logit and multi-label models
    (``problem_type="multi_label_classification"``), ``softmax`` otherwise. ``text``: ``"response"`` scores the
    response alone, ``"prompt+response"`` the whole exchange. Returns one probability per sample ->
    ``eval/<name>_mean``/``_std``.
    """

    def __init__(
        self, model: str, label: int | str | None = None, batch_size: int = 16, text: str = "response", max_length=512
    ):
        if text not in ("response", "prompt+response"):
            raise ValueError(f"text={text!r}: use 'response' or 'prompt+response'")
        self.model_path, self.label, self.batch_size, self.text, self.max_length = (
            model,
            label,
            batch_size,
            text,
            max_length,
        )
        self._model = None

    def _load(self) -> None:
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        from verl.utils.model import resolve_model_path

        path = resolve_model_path(self.model_path)
        self._tokenizer = AutoTokenizer.from_pretrained(path)
        if self._tokenizer.pad_token is None:
            self._tokenizer.pad_token = self._tokenizer.eos_token
        self._model = AutoModelForSequenceClassification.from_pretrained(path).eval()
        if self._model.config.pad_token_id is None:
            self._model.config.pad_token_id = self._tokenizer.pad_token_id
        self._label_index = self._resolve_label(self._model.config)

    def _resolve_label(self, config: Any) -> int:
        num = config.num_labels
        label = self._default_label(config) if self.label is None else self.label
        if isinstance(label, str):
            names = {str(v): int(k) for k, v in (config.id2label or {}).items()}
            if label not in names:
                raise ValueError(f"label {label!r} is not one of {self.model_path!r}'s labels {sorted(names)}")
            label = names[label]
        if not 0 <= int(label) < num:
            raise ValueError(f"label {label} is out of range: {self.model_path!r} has {num} labels")
        return int(label)

    def _default_label(self, config: Any) -> int | str:
        return 0 if config.num_labels == 1 else 1

    @torch.no_grad()
    def evaluate(self, trainer: Any, batch: DataProto) -> list[float]:
        if self._model is None:
            self._load()
        tok = trainer.tokenizer
        b = batch.batch
        mask = b["attention_mask"][:, -b["responses"].shape[1] :].bool()
        texts = tok.batch_decode([b["responses"][i][mask[i]] for i in range(len(batch))], skip_special_tokens=True)
        if self.text == "prompt+response":
            prompts = tok.batch_decode(b["prompts"], skip_special_tokens=True)
            texts = [p + t for p, t in zip(prompts, texts)]
        multi_label = self._model.config.problem_type == "multi_label_classification"
        probs: list[float] = []
        for start in range(0, len(texts), self.batch_size):
            enc = self._tokenizer(
                texts[start : start + self.batch_size],
                return_tensors="pt",
                padding=True,
                truncation=True,
                max_length=self.max_length,
            )
            logits = self._model(**enc).logits.float()
            if logits.shape[-1] == 1 or multi_label:
                p = torch.sigmoid(logits[:, self._label_index])
            else:
                p = torch.softmax(logits, dim=-1)[:, self._label_index]
            probs.extend(p.tolist())
        return probs


class ToxicityEvaluator(ClassifierScoreEvaluator):
    """:class:`ClassifierScoreEvaluator` whose default label is the model's ``toxic``/``toxicity`` label when it has
    one (as ``unitary/toxic-bert`` does), else as the parent class. ``model`` must be a local directory (download
    the hub model first)."""

    def _default_label(self, config: Any) -> int | str:
        for name in (config.id2label or {}).values():
            if str(name).lower() in ("toxic", "toxicity"):
                return str(name)
        return super()._default_label(config)
