"""Utilities; ``hf_tokenizer`` is importable from here as in public verl (``from verl.utils import hf_tokenizer``)."""

from verl.utils.tokenizer import hf_tokenizer

__all__ = ["hf_tokenizer"]
