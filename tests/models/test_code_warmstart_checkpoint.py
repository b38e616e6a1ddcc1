"""The shipped code-task warm start: loads like any HF directory, is small, and the evaluation script gives the
numbers its warmstart.json states on the held-out problems (greedy decoding on CPU: exact)."""

import importlib.util
import json
import os

import pytest
from transformers import AutoModelForCausalLM, AutoTokenizer

from verl.sandbox import bwrap_status
from verl.utils.model import ASSETS_DIR, resolve_model_path

CKPT = os.path.join(ASSETS_DIR, "tiny-qwen2-code-sft")
CARD = json.load(open(os.path.join(CKPT, "warmstart.json")))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_loads_with_auto_classes_and_is_small():
    model = AutoModelForCausalLM.from_pretrained(CKPT)
    tok = AutoTokenizer.from_pretrained(CKPT)
    assert model.config.model_type == "qwen2" and model.config.vocab_size == len(tok)
    assert (model.config.hidden_size, model.config.num_hidden_layers) == (128, 2)
    assert sum(os.path.getsize(os.path.join(CKPT, f)) for f in os.listdir(CKPT)) < 3 * 2**20
    assert resolve_model_path("builtin://tiny-qwen2-code-sft") == CKPT


@pytest.mark.slow
@pytest.mark.skipif(bwrap_status() is not None, reason=f"no bubblewrap here: {bwrap_status()}")
def test_heldout_numbers_as_stated(tmp_path):
    path = os.path.join(ROOT, "examples", "evaluation", "code_generation_eval.py")
    spec = importlib.util.spec_from_file_location("code_generation_eval", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    argv = ["--model_path", CKPT, "--test_set", CARD["held_out"], "--output", str(tmp_path / "eval.json")]
    result = module.main(argv + ["--max_new_tokens", "96", "--max_prompt_length", "160"])
    assert result["num_problems"] == 100
    for key, value in CARD["held_out_greedy"].items():
        assert result[key] == pytest.approx(value, abs=1e-9), key
    assert 0.0 < result["pass@1"] < 0.25  # room for RL above it
