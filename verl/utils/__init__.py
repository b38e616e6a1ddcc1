"""Utilities; ``hf_tokenizer`` and ``hf_processor`` are importable from here as in public verl
(``from verl.utils import hf_processor, hf_tokenizer``)."""

from verl.utils.tokenizer import hf_processor, hf_tokenizer

__all__ = ["hf_processor", "hf_tokenizer"]
