"""LoRA adapters on the actor, the critic and SFT, built on the ``peft`` library (an extra: ``pip install peft``).

``model.lora_rank > 0`` (or ``model.lora_adapter_path``) wraps the loaded HF model in a ``PeftModel`` before it is
sharded: only the adapter matrices (and a critic's value head) train, so only they carry gradients and AdamW state.

- The reference policy is the same module with its adapters switched off (``PeftModel.disable_adapter``): no second
  copy of the weights.
- A sampler that cannot run adapters gets *merged* weights, ``W + (alpha / r) * B @ A`` per adapted linear, under
  the base model's own parameter names (`iter_merged_full_tensors`): the vLLM engine after each update, the HF
  sampler's full-weight replica on the Ray backend.
- Checkpoints hold the adapter alone: ``dcp/`` (adapter + optimizer state, sharded), ``lora_adapter/`` in PEFT's
  format (``PeftModel.from_pretrained(base, dir)`` loads it) with the tokenizer.
- A directory holding a PEFT adapter (``adapter_config.json``) is a model path wherever a model is loaded: the base
  model named in it is loaded and the adapter merged in (``verl.utils.model.load_adapter_model``, beside the
  loader that calls it).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from typing import Any

import torch

PEFT_INSTALL = 'pip install peft (or pip install -e ".[lora]")'
ADAPTER_CONFIG = "adapter_config.json"
ADAPTER_DIR = "lora_adapter"  # a role checkpoint's adapter, as verl names it


def lora_enabled(model_cfg: Any) -> bool:
    """Whether a ``model`` section asks for LoRA: ``lora_rank > 0`` or a saved adapter to start from."""
    rank = int(getattr(model_cfg, "lora_rank", 0) or 0)
    return rank > 0 or getattr(model_cfg, "lora_adapter_path", None) is not None


def import_peft():
    try:
        import peft
    except ImportError as e:
        raise ImportError(f"LoRA (model.lora_rank > 0 or model.lora_adapter_path) needs peft: {PEFT_INSTALL}") from e
    return peft


def is_peft_model(module: torch.nn.Module) -> bool:
    return hasattr(module, "peft_config") and hasattr(module, "get_base_model")


def base_model(module: torch.nn.Module) -> torch.nn.Module:
    """The HF model inside a ``PeftModel`` (its forward's signature is the one to read), else ``module``."""
    return module.get_base_model() if is_peft_model(module) else module


def is_adapter_dir(path: str) -> bool:
    return os.path.isfile(os.path.join(path, ADAPTER_CONFIG))


def _module_list(value: Any) -> Any:
    """``target_modules`` / ``exclude_modules`` as PEFT takes them: ``all-linear``, a list of names, or None (a
    comma-separated string is a list too, so ``target_modules=q_proj,v_proj`` works on the command line)."""
    if value is None or value == "all-linear":
        return value
    if isinstance(value, str):
        return [v.strip() for v in value.split(",") if v.strip()]
    return [str(v) for v in value]


def apply_lora(
    module: torch.nn.Module, model_cfg: Any, seed: int = 0, task_type: str = "CAUSAL_LM", key: str = "model"
) -> torch.nn.Module:
    """``module`` wrapped in a ``PeftModel``: the adapter at ``lora_adapter_path`` (trainable), else fresh adapters
    of ``lora_rank`` / ``lora_alpha`` on ``target_modules`` minus ``exclude_modules``. The fresh A matrices are drawn
    from ``seed`` (B starts at zero, so the adapted model starts equal to the base): every rank draws the same ones,
    and the same seed gives the same run. ``task_type``: ``TOKEN_CLS`` for a critic, whose value head then trains
    in full (PEFT's ``modules_to_save``). ``key``: the config section, named in errors."""
    peft = import_peft()
    adapter_path = getattr(model_cfg, "lora_adapter_path", None)
    if adapter_path is not None:
        local = os.path.expanduser(str(adapter_path))
        if not is_adapter_dir(local):
            raise FileNotFoundError(
                f"{key}.lora_adapter_path={adapter_path!r}: no {ADAPTER_CONFIG} there; give a directory written by "
                f"PeftModel.save_pretrained, e.g. a checkpoint's actor/{ADAPTER_DIR}"
            )
        return peft.PeftModel.from_pretrained(module, local, is_trainable=True)
    rank = int(model_cfg.lora_rank)
    if rank <= 0:
        raise ValueError(f"{key}.lora_rank={rank}: LoRA needs a rank >= 1 (e.g. 16), or 0 to train every weight")
    exclude = _module_list(getattr(model_cfg, "exclude_modules", None))
    if task_type == "TOKEN_CLS":  # the value head trains in full (modules_to_save), so it carries no adapter
        exclude = sorted(set(exclude or []) | {"score", "classifier"})
    config = peft.LoraConfig(
        task_type=task_type,
        r=rank,
        lora_alpha=int(model_cfg.lora_alpha),
        target_modules=_module_list(model_cfg.target_modules),
        exclude_modules=exclude,
        bias="none",
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        try:
            return peft.get_peft_model(module, config)
        except ValueError as e:  # e.g. a target_modules name the model does not have
            raise ValueError(
                f"{key}.target_modules={model_cfg.target_modules!r}, exclude_modules="
                f"{getattr(model_cfg, 'exclude_modules', None)!r}: {e}"
            ) from e


def trainable_parameters(module: torch.nn.Module) -> list[torch.nn.Parameter]:
    """The parameters the optimizer steps: all of them without LoRA, the adapters (and value head) with it."""
    return [p for p in module.parameters() if p.requires_grad]


def _full(t: torch.Tensor) -> torch.Tensor:
    return t.full_tensor() if hasattr(t, "full_tensor") else t


def _lora_layers(base: torch.nn.Module) -> dict[str, Any]:
    from peft.tuners.lora import LoraLayer

    return {name: m for name, m in base.named_modules() if isinstance(m, LoraLayer)}


def merged_weight(layer: Any, weight: torch.Tensor, a_full: dict, b_full: dict) -> torch.Tensor:
    """``W + scaling * B @ A`` over the layer's active adapters (``fan_in_fan_out`` layers store W transposed)."""
    out = weight
    if getattr(layer, "disable_adapters", False) or getattr(layer, "merged", False):
        return out  # switched off, or already merged into the base weight
    for name in layer.active_adapters:
        if name not in a_full:
            continue
        delta = (b_full[name].float() @ a_full[name].float()) * layer.scaling[name]
        if getattr(layer, "fan_in_fan_out", False):
            delta = delta.T
        out = (out.float() + delta).to(weight.dtype)
    return out


def iter_merged_full_tensors(module: torch.nn.Module) -> Iterator[tuple[str, torch.Tensor]]:
    """``(name, whole tensor)`` of the base model's state dict with every adapter merged into its linear: what a
    sampler holding the base architecture loads (names as in the base model's own checkpoint). Sharded (DTensor)
    entries are gathered as they are reached, so it is a collective: every rank consumes it all, in order."""
    base = base_model(module)
    layers = _lora_layers(base)
    state = base.state_dict()
    for name, tensor in state.items():
        if ".lora_" in name or ".original_module." in name:
            continue  # adapter matrices are folded into their linear; a replaced head's original is not the model
        owner, _, leaf = name.rpartition(".")
        out_name = name.replace(".modules_to_save.default.", ".")
        if owner.endswith(".base_layer"):
            layer_name = owner[: -len(".base_layer")]
            out_name = f"{layer_name}.{leaf}"
            layer = layers.get(layer_name)
            if leaf == "weight" and layer is not None:
                a = {n: _full(state[f"{layer_name}.lora_A.{n}.weight"]) for n in layer.lora_A}
                b = {n: _full(state[f"{layer_name}.lora_B.{n}.weight"]) for n in layer.lora_B}
                yield out_name, merged_weight(layer, _full(tensor), a, b)
                continue
        yield out_name, _full(tensor)


def full_adapter_state(module: torch.nn.Module) -> dict[str, torch.Tensor]:
    """The trainable tensors (adapters, a critic's head) whole, under the ``PeftModel``'s names (a collective on
    the Ray backend: every rank gathers)."""
    trainable = {n for n, p in module.named_parameters() if p.requires_grad}
    return {n: _full(t).detach().cpu() for n, t in module.state_dict().items() if n in trainable}


def save_adapter(module: torch.nn.Module, state: dict[str, torch.Tensor], tokenizer: Any, out_dir: str) -> str:
    """Write ``state`` (from `full_adapter_state`) as a PEFT adapter directory at ``out_dir``, atomically, with the
    tokenizer: ``PeftModel.from_pretrained(base, out_dir)`` loads it, and so does any model path here."""
    import shutil
    import tempfile

    from peft import get_peft_model_state_dict
    from safetensors.torch import save_file

    out_dir = os.path.abspath(out_dir)
    os.makedirs(os.path.dirname(out_dir), exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=f".{os.path.basename(out_dir)}.tmp-", dir=os.path.dirname(out_dir))
    os.chmod(tmp, 0o755)
    try:
        peft_state = get_peft_model_state_dict(module, state_dict=state)
        save_file({k: v.contiguous() for k, v in peft_state.items()}, os.path.join(tmp, "adapter_model.safetensors"))
        module.peft_config["default"].save_pretrained(tmp)
        if tokenizer is not None:
            tokenizer.save_pretrained(tmp)
        if os.path.exists(out_dir):
            shutil.rmtree(out_dir)
        os.replace(tmp, out_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out_dir


def adapter_base_path(adapter_dir: str) -> str:
    """The base model an adapter directory was trained on (``base_model_name_or_path`` in its config)."""
    with open(os.path.join(adapter_dir, ADAPTER_CONFIG)) as f:
        base = json.load(f).get("base_model_name_or_path")
    if not base:
        raise ValueError(f"{adapter_dir}/{ADAPTER_CONFIG} names no base_model_name_or_path: the base model is unknown")
    return base


def count_parameters(module: torch.nn.Module) -> dict[str, int]:
    """Trainable and total parameter counts (global sizes, also on sharded modules)."""
    total = sum(p.numel() for p in module.parameters())
    return {"trainable": sum(p.numel() for p in trainable_parameters(module)), "total": total}
