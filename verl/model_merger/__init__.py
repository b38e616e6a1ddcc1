"""Checkpoints to plain Hugging Face directories: ``python -m verl.model_merger merge|test`` (public verl's CLI).

A role's checkpoint (``global_step_N/actor`` or ``.../critic``) holds ``dcp/`` (the sharded torch distributed
checkpoint, written by every worker), ``huggingface/`` (config, tokenizer and the gathered weights) and
``extra_state.pt``. `merge_checkpoint` rebuilds the model from ``dcp/`` alone -- whatever number of workers wrote it --
with the architecture of ``huggingface/config.json`` and writes an ordinary HF directory, so a checkpoint whose HF copy
was deleted or is in doubt still becomes a model ``from_pretrained`` loads. `compare_with_hf` checks the merged weights
against another HF directory, tensor by tensor.
"""

from __future__ import annotations

import os
import tempfile
from typing import Any

import torch

__all__ = ["compare_with_hf", "merge_checkpoint"]


def _auto_class(config) -> Any:
    """The Auto class that builds ``config``'s architecture: a critic is a token classifier with one label, a reward
    model a sequence classifier, anything else a causal LM."""
    import transformers

    arch = (getattr(config, "architectures", None) or [""])[0]
    if arch.endswith("ForTokenClassification"):
        return transformers.AutoModelForTokenClassification
    if arch.endswith("ForSequenceClassification"):
        return transformers.AutoModelForSequenceClassification
    return transformers.AutoModelForCausalLM


def _config_dir(local_dir: str, hf_model_path: str | None) -> str:
    source = hf_model_path or os.path.join(local_dir, "huggingface")
    if not os.path.isfile(os.path.join(source, "config.json")):
        raise FileNotFoundError(
            f"{source}: no config.json to take the architecture from (a checkpoint's huggingface/ holds one); "
            "pass --hf_model_path with the model directory the run started from"
        )
    return source


def load_merged_model(local_dir: str, hf_model_path: str | None = None, trust_remote_code: bool = False):
    """The model of the checkpoint at ``local_dir`` (``.../global_step_N/actor``), its weights read from ``dcp/``."""
    from transformers import AutoConfig

    from verl.utils.fsdp_utils import load_dcp

    local_dir = os.path.abspath(os.path.expanduser(local_dir))
    dcp_dir = os.path.join(local_dir, "dcp")
    if not os.path.isfile(os.path.join(dcp_dir, ".metadata")):
        raise FileNotFoundError(
            f"{dcp_dir}: no distributed checkpoint here. --local_dir is a role's directory inside a checkpoint, "
            "e.g. outputs/<project>/<experiment>/global_step_100/actor"
        )
    config = AutoConfig.from_pretrained(_config_dir(local_dir, hf_model_path), trust_remote_code=trust_remote_code)
    with torch.device("meta"):
        model = _auto_class(config).from_config(config, trust_remote_code=trust_remote_code)
    model.to_empty(device="cpu")  # real (uninitialised) storage; every tensor is then read from the checkpoint
    load_dcp(dcp_dir, model, None)
    if getattr(config, "tie_word_embeddings", False) and hasattr(model, "tie_weights"):
        model.tie_weights()
    return model.eval()


def merge_checkpoint(
    local_dir: str, target_dir: str, hf_model_path: str | None = None, trust_remote_code: bool = False
) -> str:
    """Write the checkpoint at ``local_dir`` as an HF directory at ``target_dir`` (weights from ``dcp/``, the tokenizer
    from ``huggingface/`` when it is there); written atomically. Returns ``target_dir``."""
    from transformers import AutoTokenizer
    from transformers.utils import logging as hf_logging

    from verl.utils.checkpoint import save_hf_checkpoint

    hf_logging.disable_progress_bar()

    model = load_merged_model(local_dir, hf_model_path, trust_remote_code)
    tokenizer = None
    source = _config_dir(os.path.abspath(os.path.expanduser(local_dir)), hf_model_path)
    if os.path.isfile(os.path.join(source, "tokenizer_config.json")):
        tokenizer = AutoTokenizer.from_pretrained(source, trust_remote_code=trust_remote_code)
    return save_hf_checkpoint(model, tokenizer, os.path.expanduser(target_dir))


def compare_with_hf(
    local_dir: str, test_hf_dir: str, hf_model_path: str | None = None, atol: float = 0.0
) -> dict[str, Any]:
    """Merge ``local_dir`` and compare every tensor with the HF directory ``test_hf_dir``: ``{"ok", "max_abs_diff",
    "missing", "unexpected", "mismatched"}`` (names only in one of them, names whose shape or values differ)."""
    from safetensors.torch import load_file

    with tempfile.TemporaryDirectory() as tmp:
        merged_dir = merge_checkpoint(local_dir, os.path.join(tmp, "merged"), hf_model_path)
        merged = _load_safetensors_dir(merged_dir, load_file)
    expected = _load_safetensors_dir(os.path.expanduser(test_hf_dir), load_file)
    missing = sorted(set(expected) - set(merged))
    unexpected = sorted(set(merged) - set(expected))
    mismatched, worst = [], 0.0
    for name in sorted(set(merged) & set(expected)):
        a, b = merged[name], expected[name]
        if a.shape != b.shape:
            mismatched.append(name)
            continue
        diff = float((a.float() - b.float()).abs().max()) if a.numel() else 0.0
        worst = max(worst, diff)
        if diff > atol:
            mismatched.append(name)
    ok = not (missing or unexpected or mismatched)
    return {"ok": ok, "max_abs_diff": worst, "missing": missing, "unexpected": unexpected, "mismatched": mismatched}


def _load_safetensors_dir(path: str, load_file) -> dict[str, torch.Tensor]:
    files = sorted(f for f in os.listdir(path) if f.endswith(".safetensors"))
    if not files:
        raise FileNotFoundError(f"{path}: no .safetensors weights to compare with")
    tensors: dict[str, torch.Tensor] = {}
    for f in files:
        tensors.update(load_file(os.path.join(path, f)))
    return tensors
