"""Checkpoints to plain Hugging Face directories: ``python -m verl.model_merger merge|test`` (public verl's CLI).

A role's checkpoint (``global_step_N/actor`` or ``.../critic``) holds ``dcp/`` (the sharded torch distributed
checkpoint, written by every worker), ``huggingface/`` (config, tokenizer and the gathered weights) and
``extra_state.pt``. `merge_checkpoint` rebuilds the model from ``dcp/`` alone -- whatever number of workers wrote it --
with the architecture of ``huggingface/config.json`` and writes an ordinary HF directory, so a checkpoint whose HF copy
was deleted or is in doubt still becomes a model ``from_pretrained`` loads. `compare_with_hf` checks the merged weights
against another HF directory, tensor by tensor.

A LoRA run's checkpoint (``model.lora_rank > 0``) has no ``huggingface/``: its ``dcp/`` holds only the trained
parameters (the adapters, a critic's value head) and ``lora_adapter/`` the adapter in PEFT's format, whose
``base_model_name_or_path`` names the frozen base model. `load_lora_checkpoint` rebuilds the ``PeftModel`` -- the base
model (``--hf_model_path``, else the adapter config's base; a token classifier with one label for a ``TOKEN_CLS``
critic) with ``lora_adapter/``'s adapter config -- and loads the trained weights from ``dcp/``, the source of truth
as for a full checkpoint. ``merge`` then writes the adapter in PEFT's format (``PeftModel.from_pretrained(base,
target_dir)`` loads it), or with ``--merge_lora`` the adapter merged into the base (``merge_and_unload``) as a full HF
directory; ``test`` compares the merged weights. ``--merge_lora`` on a full checkpoint changes nothing (its weights are
already whole).
"""

from __future__ import annotations

import os
import tempfile
from typing import Any

import torch

__all__ = ["compare_with_hf", "is_lora_checkpoint", "load_lora_checkpoint", "load_merged_model", "merge_checkpoint"]


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


def _dcp_dir(local_dir: str) -> str:
    dcp_dir = os.path.join(local_dir, "dcp")
    if not os.path.isfile(os.path.join(dcp_dir, ".metadata")):
        raise FileNotFoundError(
            f"{dcp_dir}: no distributed checkpoint here. --local_dir is a role's directory inside a checkpoint, "
            "e.g. outputs/<project>/<experiment>/global_step_100/actor"
        )
    return dcp_dir


def is_lora_checkpoint(local_dir: str) -> bool:
    """Whether ``local_dir`` is a LoRA run's role checkpoint (``lora_adapter/adapter_config.json`` is there)."""
    from verl.utils.lora import ADAPTER_DIR, is_adapter_dir

    return is_adapter_dir(os.path.join(os.path.abspath(os.path.expanduser(local_dir)), ADAPTER_DIR))


def _dcp_model_dtypes(dcp_dir: str) -> dict[str, torch.dtype]:
    """The model tensors a `save_dcp` checkpoint holds, name -> dtype (names without the ``model.`` prefix)."""
    import torch.distributed.checkpoint as dcp

    metadata = dcp.FileSystemReader(dcp_dir).read_metadata()
    return {
        name[len("model.") :]: meta.properties.dtype
        for name, meta in metadata.state_dict_metadata.items()
        if name.startswith("model.") and hasattr(meta, "properties")
    }


def _lora_base_path(adapter_dir: str, hf_model_path: str | None) -> str:
    from verl.utils.lora import adapter_base_path
    from verl.utils.model import resolve_model_path

    source = hf_model_path or adapter_base_path(adapter_dir)
    hint = "pass --hf_model_path with the base model directory the run started from"
    try:
        base = resolve_model_path(source)
    except FileNotFoundError as e:
        raise FileNotFoundError(f"{adapter_dir}: its base model is not here ({e}); {hint}") from e
    if not os.path.isfile(os.path.join(base, "config.json")):
        raise FileNotFoundError(f"{base}: no config.json, not a base model directory; {hint}")
    return os.path.abspath(base)


def load_lora_checkpoint(local_dir: str, hf_model_path: str | None = None, trust_remote_code: bool = False):
    """The ``PeftModel`` of the LoRA checkpoint at ``local_dir``, in fp32: the base model (``hf_model_path``, else
    ``lora_adapter/``'s ``base_model_name_or_path``; a token classifier with one label for a ``TOKEN_CLS`` critic,
    as the critic worker builds it) with ``lora_adapter/``'s adapter, whose trained weights are then read from
    ``dcp/`` (the adapters and a critic's value head; the frozen base is the base model's own)."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

    from verl.utils.fsdp_utils import load_dcp
    from verl.utils.lora import ADAPTER_DIR, import_peft
    from verl.utils.model import load_causal_lm, load_value_model

    peft = import_peft()
    local_dir = os.path.abspath(os.path.expanduser(local_dir))
    adapter_dir = os.path.join(local_dir, ADAPTER_DIR)
    dcp_dir = _dcp_dir(local_dir)
    base_path = _lora_base_path(adapter_dir, hf_model_path)
    task_type = peft.PeftConfig.from_pretrained(adapter_dir).task_type
    if task_type in (None, "CAUSAL_LM"):
        base = load_causal_lm(base_path, dtype=torch.float32, trust_remote_code=trust_remote_code)
    elif task_type == "TOKEN_CLS":  # a critic, built as the critic worker builds it; its head is read from dcp/
        base = load_value_model(base_path, trust_remote_code=trust_remote_code).float()
    else:
        raise ValueError(f"{adapter_dir}: PEFT task_type {task_type!r} is not one verl trains (CAUSAL_LM, TOKEN_CLS)")
    # is_trainable: the adapters (and a value head) require grad, which is what marks them as dcp/'s tensors
    model = peft.PeftModel.from_pretrained(base, adapter_dir, is_trainable=True)
    model.peft_config["default"].base_model_name_or_path = base_path

    saved = set(_dcp_model_dtypes(dcp_dir))
    wanted = set(get_model_state_dict(model, options=StateDictOptions(ignore_frozen_params=True, strict=False)))
    if saved - wanted or not wanted & saved:
        raise ValueError(
            f"{dcp_dir} does not fit the adapter of {adapter_dir} on {base_path}: tensors only in the checkpoint "
            f"{sorted(saved - wanted)[:5]}, only in the rebuilt model {sorted(wanted - saved)[:5]}"
        )
    load_dcp(dcp_dir, model, None, trainable_only=True)
    return model.eval()


def _merged(model):
    """``merge_and_unload`` of a `load_lora_checkpoint` model (merged in fp32), in the base model's own dtype."""
    base_path = model.peft_config["default"].base_model_name_or_path
    merged = model.merge_and_unload()
    dtype = _config_dtype(base_path)
    if dtype is not None and dtype != torch.float32:
        merged.to(dtype)
        merged.config.dtype = dtype
    return merged.eval()


def _config_dtype(path: str) -> torch.dtype | None:
    import json

    with open(os.path.join(path, "config.json")) as f:
        config = json.load(f)
    name = config.get("dtype") or config.get("torch_dtype")
    dtype = getattr(torch, name, None) if isinstance(name, str) else None
    return dtype if isinstance(dtype, torch.dtype) and dtype.is_floating_point else None


def _lora_tokenizer(local_dir: str, base_path: str, trust_remote_code: bool):
    from transformers import AutoTokenizer

    from verl.utils.lora import ADAPTER_DIR

    for source in (os.path.join(local_dir, ADAPTER_DIR), base_path):
        if os.path.isfile(os.path.join(source, "tokenizer_config.json")):
            return AutoTokenizer.from_pretrained(source, trust_remote_code=trust_remote_code)
    return None


def _merge_lora_checkpoint(
    local_dir: str, target_dir: str, hf_model_path: str | None, trust_remote_code: bool, merge_lora: bool
) -> str:
    from verl.utils.checkpoint import save_hf_checkpoint
    from verl.utils.lora import full_adapter_state, save_adapter

    local_dir = os.path.abspath(os.path.expanduser(local_dir))
    model = load_lora_checkpoint(local_dir, hf_model_path, trust_remote_code)
    base_path = model.peft_config["default"].base_model_name_or_path
    tokenizer = _lora_tokenizer(local_dir, base_path, trust_remote_code)
    target_dir = os.path.expanduser(target_dir)
    if merge_lora:
        return save_hf_checkpoint(_merged(model), tokenizer, target_dir)
    dtypes = _dcp_model_dtypes(os.path.join(local_dir, "dcp"))  # the adapter as trained: fp32 read back as saved
    state = {name: t.to(dtypes.get(name, t.dtype)) for name, t in full_adapter_state(model).items()}
    return save_adapter(model, state, tokenizer, target_dir)


def load_merged_model(local_dir: str, hf_model_path: str | None = None, trust_remote_code: bool = False):
    """The model of the checkpoint at ``local_dir`` (``.../global_step_N/actor``), its weights read from ``dcp/``;
    of a LoRA checkpoint, the base model with the trained adapter merged in."""
    from transformers import AutoConfig

    from verl.utils.fsdp_utils import load_dcp

    local_dir = os.path.abspath(os.path.expanduser(local_dir))
    if is_lora_checkpoint(local_dir):
        return _merged(load_lora_checkpoint(local_dir, hf_model_path, trust_remote_code))
    dcp_dir = _dcp_dir(local_dir)
    config = AutoConfig.from_pretrained(_config_dir(local_dir, hf_model_path), trust_remote_code=trust_remote_code)
    with torch.device("meta"):
        model = _auto_class(config).from_config(config, trust_remote_code=trust_remote_code)
    model.to_empty(device="cpu")  # real (uninitialised) storage; every tensor is then read from the checkpoint
    load_dcp(dcp_dir, model, None)
    if getattr(config, "tie_word_embeddings", False) and hasattr(model, "tie_weights"):
        model.tie_weights()
    return model.eval()


def merge_checkpoint(
    local_dir: str,
    target_dir: str,
    hf_model_path: str | None = None,
    trust_remote_code: bool = False,
    merge_lora: bool = False,
) -> str:
    """Write the checkpoint at ``local_dir`` as an HF directory at ``target_dir`` (weights from ``dcp/``, the tokenizer
    from ``huggingface/`` when it is there); written atomically. Returns ``target_dir``.

    A LoRA checkpoint (``lora_adapter/``) becomes its adapter in PEFT's format, the trained weights from ``dcp/``;
    ``merge_lora``: the base model with the adapter merged in, a full HF directory. On a full checkpoint
    ``merge_lora`` changes nothing."""
    from transformers import AutoTokenizer
    from transformers.utils import logging as hf_logging

    from verl.utils.checkpoint import save_hf_checkpoint

    hf_logging.disable_progress_bar()
    if is_lora_checkpoint(local_dir):
        return _merge_lora_checkpoint(local_dir, target_dir, hf_model_path, trust_remote_code, merge_lora)

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
    "missing", "unexpected", "mismatched"}`` (names only in one of them, names whose shape or values differ). A LoRA
    checkpoint is compared merged (the base model with the adapter merged in)."""
    from safetensors.torch import load_file

    lora = is_lora_checkpoint(local_dir)
    with tempfile.TemporaryDirectory() as tmp:
        merged_dir = merge_checkpoint(local_dir, os.path.join(tmp, "merged"), hf_model_path, merge_lora=lora)
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
