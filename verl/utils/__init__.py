"""Utilities; ``hf_tokenizer``, ``hf_processor`` and ``omega_conf_to_dataclass`` are importable from here as in
public verl (``from verl.utils import hf_processor, hf_tokenizer``)."""

from verl.utils.config import omega_conf_to_dataclass
from verl.utils.tokenizer import hf_processor, hf_tokenizer

__all__ = ["hf_processor", "hf_tokenizer", "omega_conf_to_dataclass"]
