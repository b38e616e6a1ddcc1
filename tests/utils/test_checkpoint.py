"""save_hf_checkpoint: all or nothing -- a failure while swapping directories leaves the previous checkpoint."""

import os

import pytest

from verl.models.tiny import TinyModelConfig, build_tiny_model, build_tokenizer
from verl.utils.checkpoint import save_hf_checkpoint


def test_a_failed_swap_keeps_the_previous_checkpoint(tmp_path, monkeypatch):
    tok = build_tokenizer()
    model = build_tiny_model(tok, TinyModelConfig(hidden_size=32, num_layers=1))
    out = tmp_path / "ckpt"
    save_hf_checkpoint(model, tok, str(out))
    before = sorted(os.listdir(out))
    real_replace = os.replace

    def failing_replace(src, dst):
        if str(dst) == str(out) and ".tmp-" in str(src) and not str(src).endswith(".old"):
            raise OSError("disk full")
        return real_replace(src, dst)

    monkeypatch.setattr(os, "replace", failing_replace)
    with pytest.raises(OSError, match="disk full"):
        save_hf_checkpoint(model, tok, str(out))
    monkeypatch.setattr(os, "replace", real_replace)
    assert sorted(os.listdir(out)) == before  # the previous checkpoint, in place
    assert [p for p in os.listdir(tmp_path) if p != "ckpt"] == []  # no orphaned temp or .old directory
