import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from verl.models.tiny import TinyModelConfig, build_tiny_model, build_tokenizer, save_tiny_model


def test_saved_directory_loads_with_auto_classes(tiny_model_dir):
    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    assert model.config.model_type == "qwen2"
    assert tok.pad_token == "<|endoftext|>" and tok.eos_token == "<|im_end|>"
    assert tok.pad_token_id != tok.eos_token_id
    assert model.config.vocab_size == len(tok)
    text = tok.apply_chat_template(
        [{"role": "user", "content": "What is 1 + 2?"}], add_generation_prompt=True, tokenize=False
    )
    assert text == "<|im_start|>user\nWhat is 1 + 2?<|im_end|>\n<|im_start|>assistant\n"
    ids = tok(text, add_special_tokens=False)["input_ids"]
    assert ids[0] == tok.convert_tokens_to_ids("<|im_start|>")
    out = model(input_ids=torch.tensor([ids]))
    assert out.logits.shape == (1, len(ids), len(tok))


def test_byte_level_round_trip_and_digits_are_single_tokens():
    tok = build_tokenizer()
    for text in ["37 + 48 = 85\n#### 85", "héllo 漢字 ٨٥ ８５", "  two  spaces", ""]:
        assert tok.decode(tok(text)["input_ids"]) == text
    assert all(len(tok(d)["input_ids"]) == 1 for d in "0123456789")


def test_same_seed_same_weights_and_llama_arch(tmp_path):
    tok = build_tokenizer()
    a = build_tiny_model(tok, TinyModelConfig(seed=3))
    b = build_tiny_model(tok, TinyModelConfig(seed=3))
    c = build_tiny_model(tok, TinyModelConfig(seed=4))
    pa, pb, pc = (dict(m.named_parameters()) for m in (a, b, c))
    assert all(torch.equal(pa[k], pb[k]) for k in pa)
    assert not all(torch.equal(pa[k], pc[k]) for k in pa)
    path = save_tiny_model(str(tmp_path / "llama"), TinyModelConfig(arch="llama", hidden_size=64, num_layers=1))
    assert AutoModelForCausalLM.from_pretrained(path).config.model_type == "llama"
    assert (tmp_path / "llama" / "model.safetensors").exists()


def test_vocab_size_pads_the_embedding_and_cannot_drop_tokens():
    tok = build_tokenizer()
    model = build_tiny_model(tok, TinyModelConfig(hidden_size=32, num_layers=1, intermediate_size=64, vocab_size=1000))
    assert model.config.vocab_size == 1000 and model.get_input_embeddings().weight.shape == (1000, 32)
    with pytest.raises(ValueError, match="vocab_size=10 is smaller than the tokenizer's 259 tokens"):
        build_tiny_model(tok, TinyModelConfig(vocab_size=10))
