import json
import os

import pytest

from verl.utils.model import load_causal_lm, load_tokenizer, resolve_model_path


def test_missing_path_names_it_and_lists_builtins(tmp_path):
    with pytest.raises(FileNotFoundError, match="is not a directory.*builtin://tiny-qwen2"):
        resolve_model_path(str(tmp_path / "nope"))
    with pytest.raises(FileNotFoundError, match="hub id"):
        resolve_model_path("Qwen/Qwen2.5-0.5B-Instruct")


def test_directory_without_config_json(tmp_path):
    with pytest.raises(FileNotFoundError, match="no config.json"):
        resolve_model_path(str(tmp_path))


def test_builtin_tiny_model_is_cached_and_deterministic():
    a = resolve_model_path("builtin://tiny-qwen2?hidden_size=64&num_layers=1")
    b = resolve_model_path("builtin://tiny-qwen2?hidden_size=64&num_layers=1")
    assert a == b and os.path.isfile(os.path.join(a, "model.safetensors"))
    assert load_causal_lm(a).config.hidden_size == 64
    assert os.path.basename(a) == "tiny-qwen2-b730135866"  # the name it had before vocab_size existed: caches stay
    wide = resolve_model_path("builtin://tiny-qwen2?hidden_size=32&num_layers=1&intermediate_size=64&vocab_size=300")
    assert load_causal_lm(wide).config.vocab_size == 300
    with pytest.raises(ValueError, match="unknown parameter 'hiden_size'"):
        resolve_model_path("builtin://tiny-qwen2?hiden_size=64")
    with pytest.raises(FileNotFoundError, match="unknown built-in model"):
        resolve_model_path("builtin://giant")


def test_tokenizer_without_pad_falls_back_to_eos_and_without_both_errors(tiny_model_dir, tmp_path):
    import shutil

    for name, drop in (("no-pad", ["pad_token"]), ("no-pad-no-eos", ["pad_token", "eos_token"])):
        d = tmp_path / name
        shutil.copytree(tiny_model_dir, d)
        cfg_path = d / "tokenizer_config.json"
        cfg = json.loads(cfg_path.read_text())
        for key in drop:
            cfg[key] = None
        cfg_path.write_text(json.dumps(cfg))
        if name == "no-pad":
            tok = load_tokenizer(str(d))
            assert tok.pad_token == tok.eos_token == "<|im_end|>"
        else:
            with pytest.raises(ValueError, match="neither a pad token nor an EOS token.*tokenizer_config.json"):
                load_tokenizer(str(d))


def test_update_model_config_sets_nested_fields():
    from types import SimpleNamespace

    from verl.utils.model import update_model_config

    cfg = SimpleNamespace(dropout=0.1, rope=SimpleNamespace(theta=1e4, kind="linear"))
    update_model_config(cfg, {"dropout": 0.0, "rope": {"theta": 5e5}})
    assert (cfg.dropout, cfg.rope.theta, cfg.rope.kind) == (0.0, 5e5, "linear")
    with pytest.raises(AttributeError, match="no sub-config 'attn'"):
        update_model_config(cfg, {"attn": {"heads": 2}})


def test_create_random_mask_is_one_contiguous_run_per_row():
    import torch

    from verl.utils.model import create_random_mask

    torch.manual_seed(0)
    mask = create_random_mask(torch.zeros(50, 20, dtype=torch.long), 0.8, 0.2, 0.25)
    valid = mask.sum(-1)
    assert mask.dtype == torch.int64 and valid.min() >= 5 and valid.max() <= 16
    first = mask.argmax(-1)
    assert first.max() <= 4  # at most 20% left padding
    assert all(mask[i, first[i] : first[i] + valid[i]].all() for i in range(50))  # no holes
    with pytest.raises(ValueError, match="do not fit rows of 20"):
        create_random_mask(torch.zeros(2, 20), 0.9, 0.5)
