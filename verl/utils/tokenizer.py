"""``hf_tokenizer`` and ``hf_processor``: public verl's tokenizer and processor loaders, for scripts that import them."""

from __future__ import annotations

from typing import Any

__all__ = ["hf_processor", "hf_tokenizer"]


def hf_tokenizer(name_or_path: str, correct_pad_token: bool = True, trust_remote_code: bool = False, **kwargs: Any):
    """A tokenizer from a local model directory (or ``builtin://`` name), left-padded as the rollout needs, with the
    pad token set to EOS when it has none (``correct_pad_token``, as verl). Other keyword arguments go to
    ``AutoTokenizer.from_pretrained``."""
    if not correct_pad_token or kwargs:
        from transformers import AutoTokenizer

        from verl.utils.model import resolve_model_path

        tokenizer = AutoTokenizer.from_pretrained(
            resolve_model_path(name_or_path), trust_remote_code=trust_remote_code, **kwargs
        )
        if correct_pad_token and tokenizer.pad_token_id is None:
            tokenizer.pad_token = tokenizer.eos_token
        return tokenizer
    from verl.utils.model import load_tokenizer

    return load_tokenizer(name_or_path, trust_remote_code=trust_remote_code)


def hf_processor(name_or_path: str, **kwargs: Any):
    """The model's multimodal processor (``AutoProcessor``: images or audio with text), or None for a text-only
    model, whose tokenizer is all it needs (as in verl, which passes ``processor=None`` on to the dataset and the
    workers then). Keyword arguments go to ``AutoProcessor.from_pretrained``."""
    from transformers import AutoProcessor

    from verl.utils.model import resolve_model_path

    try:
        processor = AutoProcessor.from_pretrained(resolve_model_path(name_or_path), **kwargs)
    except (OSError, ValueError, KeyError):  # no processor files: a text-only model
        return None
    # for a text-only model AutoProcessor falls back to the tokenizer, which is not a processor
    return processor if "Processor" in type(processor).__name__ else None
