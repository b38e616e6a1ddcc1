"""Model shapes: presets against the published parameter counts, and a real HF directory's config against the
parameters transformers actually builds."""

from __future__ import annotations

import pytest

from verl.planner.shapes import preset_shape, shape_from_model_path


@pytest.mark.parametrize(
    "size, params",
    # Qwen2.5-0.5B, Qwen2.5-7B and Llama-3.1-8B as their model cards count them
    [("0.5b", 494_032_768), ("7b", 7_615_616_512), ("8b", 8_030_261_248)],
)
def test_presets_count_the_published_parameters(size, params):
    assert preset_shape(size).num_params == params


def test_an_unknown_size_names_the_known_ones():
    with pytest.raises(ValueError, match=r"--model_size '9z'.*0\.5b.*--model_path"):
        preset_shape("9z")


@pytest.mark.parametrize("tied", [True, False])
def test_a_model_directory_counts_what_transformers_builds(tmp_path, tied):
    from transformers import AutoModelForCausalLM

    from verl.models.tiny import TinyModelConfig, save_tiny_model

    path = str(tmp_path / "m")
    save_tiny_model(
        path, TinyModelConfig(hidden_size=96, num_layers=3, num_heads=6, num_kv_heads=2, tie_word_embeddings=tied)
    )
    model = AutoModelForCausalLM.from_pretrained(path)
    shape = shape_from_model_path(path)
    assert shape.num_params == sum(p.numel() for p in model.parameters())
    assert (shape.kv_dim, shape.num_layers) == (2 * 16, 3)


def test_lora_counts_what_peft_adds(tmp_path):
    pytest.importorskip("peft")
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    from verl.models.tiny import TinyModelConfig, save_tiny_model

    path = str(tmp_path / "m")
    save_tiny_model(path, TinyModelConfig(hidden_size=64, num_layers=2, num_heads=4, num_kv_heads=2))
    model = get_peft_model(AutoModelForCausalLM.from_pretrained(path), LoraConfig(r=8, target_modules="all-linear"))
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    assert shape_from_model_path(path).lora_params(8) == trainable
