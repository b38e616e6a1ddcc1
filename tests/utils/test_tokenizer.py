"""``from verl.utils import hf_processor, hf_tokenizer``: a text-only model has a tokenizer and no processor."""

from verl.utils import hf_processor, hf_tokenizer


def test_text_only_model_has_no_processor():
    tok = hf_tokenizer("builtin://tiny-qwen2")
    assert tok.pad_token_id is not None
    assert hf_processor("builtin://tiny-qwen2") is None
