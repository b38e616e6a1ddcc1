"""Calling a Hugging Face causal LM's ``forward`` across transformers versions: the name of its KV-cache argument,
whether it trims the logits to the last positions, and where its output keeps the cache."""

from __future__ import annotations

import inspect

import torch


def forward_signature(module: torch.nn.Module) -> tuple[str, bool]:
    """How to call a causal LM's ``forward``: the KV-cache argument's name (transformers >= 5.2x: ``cache``; before:
    ``past_key_values``) and whether it takes ``logits_to_keep`` (the lm_head on the last positions only)."""
    if hasattr(module, "peft_config") and hasattr(module, "get_base_model"):
        module = module.get_base_model()  # a LoRA PeftModel passes its keywords on to the HF model's forward
    try:
        params = inspect.signature(module.forward).parameters
    except (TypeError, ValueError):
        params = {}
    return ("cache" if "cache" in params else "past_key_values"), "logits_to_keep" in params


def output_cache(out):
    """The KV cache a causal LM's forward returned with ``use_cache=True`` (``out.cache`` in transformers >= 5.2x,
    ``out.past_key_values`` before), or None."""
    cache = getattr(out, "cache", None)
    return cache if cache is not None else getattr(out, "past_key_values", None)
