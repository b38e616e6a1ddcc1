"""Loading HF models and tokenizers from local directories, with errors that say what to fix.

A model path is either a local HF directory (``/models/Qwen2.5-0.5B-Instruct``) or a built-in name:

- ``builtin://tiny-qwen2-arith-sft`` (any directory under ``verl/assets/models/``): a checkpoint shipped with verl;
- ``builtin://tiny-qwen2?hidden_size=128&num_layers=2&seed=0`` (or ``tiny-llama``): a freshly initialised tiny
  model from :mod:`verl.models.tiny`, written once to the cache (``$VERL_CACHE_DIR``, default ``~/.cache/verl``);
  ``?tools=true`` gives it the tool-calling tokenizer and chat template.

Both resolve to an ordinary directory first, so the loading code path is the one a user's real model takes.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import tempfile
from dataclasses import fields
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import torch

from verl.utils.forward import forward_signature, output_cache  # noqa: F401 (importable from here too)
from verl.utils.lora import adapter_base_path, import_peft

logger = logging.getLogger(__name__)

BUILTIN_PREFIX = "builtin://"
ASSETS_DIR = os.path.join(os.path.dirname(os.path.dirname(__file__)), "assets", "models")


def verl_cache_dir() -> str:
    return os.path.expanduser(os.environ.get("VERL_CACHE_DIR", "~/.cache/verl"))


def list_builtin_models() -> list[str]:
    shipped = sorted(d for d in os.listdir(ASSETS_DIR) if os.path.isdir(os.path.join(ASSETS_DIR, d)))
    return shipped + ["tiny-qwen2", "tiny-llama"]


def resolve_model_path(path: str) -> str:
    """Turn a model path or ``builtin://`` name into an existing local directory, or raise a clear error."""
    if path is None:
        raise ValueError("no model path given: set it, e.g. actor_rollout_ref.model.path=/path/to/hf_model_dir")
    path = str(path)
    if path.startswith(BUILTIN_PREFIX):
        return _resolve_builtin_model(path)
    local = os.path.expanduser(path)
    if not os.path.isdir(local):
        hint = ""
        if "/" in path and not path.startswith((".", "/", "~")):
            hint = (
                " It looks like a hub id; no model hub is reachable here, so download the model on a machine that "
                "has access (huggingface-cli download ...) and pass the local directory."
            )
        raise FileNotFoundError(
            f"model path {path!r} is not a directory.{hint} Built-in models: "
            + ", ".join(BUILTIN_PREFIX + n for n in list_builtin_models())
        )
    if not os.path.isfile(os.path.join(local, "config.json")):
        if os.path.isfile(os.path.join(local, "adapter_config.json")):
            return local  # a PEFT adapter: load_causal_lm loads its base model and merges it in
        raise FileNotFoundError(
            f"model directory {local!r} has no config.json: it is not a Hugging Face model directory "
            "(expected config.json, *.safetensors and the tokenizer files, as written by save_pretrained)."
        )
    return local


def _resolve_builtin_model(spec: str) -> str:
    from verl.models.tiny import TinyModelConfig, save_tiny_model

    parts = urlsplit(spec)
    name = parts.netloc + parts.path
    params = dict(parse_qsl(parts.query))
    shipped = os.path.join(ASSETS_DIR, name)
    if os.path.isdir(shipped) and not params:
        return shipped
    if name not in ("tiny-qwen2", "tiny-llama"):
        raise FileNotFoundError(
            f"unknown built-in model {spec!r}; available: "
            + ", ".join(BUILTIN_PREFIX + n for n in list_builtin_models())
        )
    known = {f.name: f.type for f in fields(TinyModelConfig)}
    kwargs: dict = {"arch": name.removeprefix("tiny-")}
    for key, value in params.items():
        if key not in known or key == "arch":
            raise ValueError(f"{spec!r}: unknown parameter {key!r}; valid: {sorted(k for k in known if k != 'arch')}")
        declared = str(known[key])  # the annotation's text, e.g. "bool | None" (from __future__ annotations)
        if declared.startswith("bool"):
            kwargs[key] = value.lower() in ("1", "true", "yes")
        else:
            try:
                kwargs[key] = int(value) if declared.startswith("int") else type(getattr(TinyModelConfig(), key))(value)
            except ValueError:
                raise ValueError(f"{spec!r}: {key}={value!r} is not a valid {declared.split()[0]}") from None
    cfg = TinyModelConfig(**kwargs)
    # fields left at None stay out of the key, so adding an optional field keeps every cached directory's name
    settings = sorted((k, v) for k, v in vars(cfg).items() if v is not None)
    digest = hashlib.sha1(repr(settings).encode()).hexdigest()[:10]
    out_dir = os.path.join(verl_cache_dir(), "models", f"{name}-{digest}")
    if not os.path.isfile(os.path.join(out_dir, "config.json")):
        os.makedirs(os.path.dirname(out_dir), exist_ok=True)
        tmp = tempfile.mkdtemp(prefix=f".{name}-", dir=os.path.dirname(out_dir))
        os.chmod(tmp, 0o755)
        save_tiny_model(tmp, cfg)
        try:
            os.replace(tmp, out_dir)  # atomic: concurrent runs never see a half-written directory
        except OSError:
            shutil.rmtree(tmp, ignore_errors=True)  # another process won the race
    return out_dir


def compute_position_id_with_mask(mask: torch.Tensor) -> torch.Tensor:
    """Position ids of a left-padded batch from its attention mask (bs, seq): 0 at the first real token, counting up,
    0 on the padding before it (public verl's helper)."""
    return torch.clamp(mask.long().cumsum(dim=-1) - 1, min=0)


def update_model_config(module_config: Any, override_config_kwargs: dict) -> None:
    """Set each entry of ``override_config_kwargs`` on ``module_config`` (an HF ``PretrainedConfig``), in place;
    a dict value updates the sub-config of that name key by key (verl's ``model.override_config``)."""
    for key, value in override_config_kwargs.items():
        if isinstance(value, dict):
            if not hasattr(module_config, key):
                raise AttributeError(
                    f"override_config: the model config has no sub-config {key!r} to update with {value}"
                )
            update_model_config(getattr(module_config, key), value)
        else:
            setattr(module_config, key, value)


def create_random_mask(
    input_ids: torch.Tensor,
    max_ratio_of_valid_token: float,
    max_ratio_of_left_padding: float,
    min_ratio_of_valid_token: float = 0,
) -> torch.Tensor:
    """A random attention mask for ``input_ids`` (bs, L), for tests: each row gets a left padding of 0 ..
    ``max_ratio_of_left_padding * L`` tokens, then ``min_ratio .. max_ratio_of_valid_token * L`` (at least 1) real
    tokens, then right padding. int64 (bs, L); drawn from torch's global generator."""
    bs, length = input_ids.shape
    if not 0 < max_ratio_of_valid_token <= 1 or not 0 <= max_ratio_of_left_padding < 1:
        raise ValueError(
            "create_random_mask: max_ratio_of_valid_token must be in (0, 1] and max_ratio_of_left_padding in [0, 1)"
        )
    max_valid = int(length * max_ratio_of_valid_token)
    min_valid = max(1, int(length * min_ratio_of_valid_token))
    max_left = int(length * max_ratio_of_left_padding)
    if min_valid > max_valid or max_valid + max_left > length:
        raise ValueError(
            f"create_random_mask: {min_valid}..{max_valid} valid tokens after up to {max_left} padding tokens do "
            f"not fit rows of {length}"
        )
    left = torch.randint(0, max_left + 1, (bs, 1))
    valid = torch.randint(min_valid, max_valid + 1, (bs, 1))
    pos = torch.arange(length).unsqueeze(0)
    return ((pos >= left) & (pos < left + valid)).to(torch.int64).to(input_ids.device)


def import_external_lib(name: str | None) -> None:
    """Import the module ``name`` (verl's ``model.external_lib``): a package that registers custom architectures with
    transformers' Auto classes when imported. Every process that loads models calls this."""
    if not name:
        return
    import importlib

    try:
        importlib.import_module(name)
    except ImportError as e:
        raise ImportError(
            f"actor_rollout_ref.model.external_lib={name!r} could not be imported ({e}): install it in this "
            "environment, or put its directory on PYTHONPATH"
        ) from e


def load_tokenizer(path: str, padding_side: str = "left", trust_remote_code: bool = False):
    """Load a tokenizer from a model directory; pad falls back to EOS (as for Llama), neither is an error.
    ``trust_remote_code``: allow the directory's own tokenizer code (verl's ``model.trust_remote_code``)."""
    from transformers import AutoTokenizer

    local = resolve_model_path(path)
    try:
        tokenizer = AutoTokenizer.from_pretrained(local, trust_remote_code=trust_remote_code)
    except Exception as e:  # transformers raises many types here; the user needs the path and the cause
        raise ValueError(f"could not load a tokenizer from {local!r}: {type(e).__name__}: {e}") from e
    if tokenizer.pad_token_id is None:
        if tokenizer.eos_token_id is None:
            raise ValueError(
                f'tokenizer in {local!r} has neither a pad token nor an EOS token: set "pad_token" and '
                f'"eos_token" in {os.path.join(local, "tokenizer_config.json")} (e.g. to the end-of-turn token).'
            )
        logger.warning("tokenizer in %s has no pad token; using its EOS token %r", local, tokenizer.eos_token)
        tokenizer.pad_token = tokenizer.eos_token
    tokenizer.padding_side = padding_side
    return tokenizer


def load_causal_lm(
    path: str,
    dtype: torch.dtype | str = torch.float32,
    override_config: dict | None = None,
    trust_remote_code: bool = False,
):
    """Load ``AutoModelForCausalLM`` from a local directory (or ``builtin://`` name). ``override_config``
    (verl's ``actor_rollout_ref.model.override_config``): attributes of the model's config replaced before the
    weights load, e.g. ``{"attention_dropout": 0.0}``; a key the config does not have is an error naming it.
    ``trust_remote_code``: allow the directory's own modelling code (verl's ``model.trust_remote_code``). A PEFT
    adapter directory (a LoRA checkpoint's ``lora_adapter/``) loads as its base model with the adapter merged in."""
    from transformers import AutoConfig, AutoModelForCausalLM
    from transformers.utils import logging as hf_logging

    local = resolve_model_path(path)
    hf_logging.disable_progress_bar()
    if not os.path.isfile(os.path.join(local, "config.json")):  # a LoRA adapter directory (verl.utils.lora)
        return load_adapter_model(local, dtype=_as_dtype(dtype), trust_remote_code=trust_remote_code)
    kwargs: dict[str, Any] = {"trust_remote_code": trust_remote_code}
    if override_config:
        config = AutoConfig.from_pretrained(local, trust_remote_code=trust_remote_code)
        unknown = sorted(k for k in override_config if not hasattr(config, k))
        if unknown:
            raise ValueError(
                f"actor_rollout_ref.model.override_config: {unknown} are not attributes of {local}'s config "
                f"({type(config).__name__})"
            )
        for key, value in override_config.items():
            setattr(config, key, value)
        kwargs["config"] = config
    try:
        return AutoModelForCausalLM.from_pretrained(local, dtype=_as_dtype(dtype), **kwargs)
    except Exception as e:
        raise ValueError(f"could not load a causal LM from {local!r}: {type(e).__name__}: {e}") from e


def load_adapter_model(adapter_dir: str, dtype: torch.dtype = torch.float32, trust_remote_code: bool = False):
    """The base model of ``adapter_dir`` with the adapter merged in: a plain HF model (``merge_and_unload``)."""
    peft = import_peft()
    base = load_causal_lm(adapter_base_path(adapter_dir), dtype=dtype, trust_remote_code=trust_remote_code)
    return peft.PeftModel.from_pretrained(base, adapter_dir).merge_and_unload()


def load_value_model(path: str, seed: int = 0, trust_remote_code: bool = False):
    """A value model: ``AutoModelForTokenClassification`` with one label on the causal LM at ``path`` (the critic).
    Its fresh value head is drawn from ``seed`` (same seed, same critic), with no classifier dropout (as verl: values
    must be a deterministic function of the tokens); transformers' "newly initialized" notice is expected and muted."""
    from transformers import AutoConfig, AutoModelForTokenClassification
    from transformers.utils import logging as hf_logging

    local = resolve_model_path(path)
    hf_logging.disable_progress_bar()
    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    try:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            config = AutoConfig.from_pretrained(local, num_labels=1, trust_remote_code=trust_remote_code)
            config.classifier_dropout = 0.0
            return AutoModelForTokenClassification.from_pretrained(
                local, config=config, trust_remote_code=trust_remote_code
            )
    finally:
        hf_logging.set_verbosity(verbosity)


def _as_dtype(dtype: torch.dtype | str) -> torch.dtype:
    if isinstance(dtype, torch.dtype):
        return dtype
    names = {
        "fp32": torch.float32,
        "float32": torch.float32,
        "bf16": torch.bfloat16,
        "bfloat16": torch.bfloat16,
        "fp16": torch.float16,
        "float16": torch.float16,
    }
    if dtype not in names:
        raise ValueError(f"unknown dtype {dtype!r}; use one of {sorted(names)}")
    return names[dtype]
