"""Utilities; ``hf_tokenizer``, ``hf_processor`` and ``omega_conf_to_dataclass`` are importable from here as in
public verl (``from verl.utils import hf_processor, hf_tokenizer``), loaded on first use: ``import verl`` imports
``verl.utils.cpu_threads`` (the thread policy, standard library only) and must not pull omegaconf or transformers."""

import importlib

_LAZY = {
    "hf_processor": "verl.utils.tokenizer",
    "hf_tokenizer": "verl.utils.tokenizer",
    "omega_conf_to_dataclass": "verl.utils.config",
}
__all__ = ["hf_processor", "hf_tokenizer", "omega_conf_to_dataclass"]


def __getattr__(name: str):
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'verl.utils' has no attribute {name!r}")
