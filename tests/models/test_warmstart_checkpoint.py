"""The shipped warm start loads like any HF directory and is only partly trained (15%-50% held-out accuracy)."""

import json
import os

import pytest
from transformers import AutoModelForCausalLM, AutoTokenizer

from verl.trainer.main_eval import main as eval_main
from verl.utils.model import ASSETS_DIR, resolve_model_path

CKPT = os.path.join(ASSETS_DIR, "tiny-qwen2-arith-sft")


def test_loads_with_auto_classes_and_is_small():
    model = AutoModelForCausalLM.from_pretrained(CKPT)
    tok = AutoTokenizer.from_pretrained(CKPT)
    assert model.config.model_type == "qwen2" and tok.eos_token == "<|im_end|>"
    size = sum(os.path.getsize(os.path.join(CKPT, f)) for f in os.listdir(CKPT))
    assert size < 5 * 2**20
    assert resolve_model_path("builtin://tiny-qwen2-arith-sft") == CKPT


@pytest.mark.slow
def test_heldout_accuracy_in_stated_range_on_fresh_data(tmp_path):
    # Freshly generated (into this test's own cache dir): the whole held-out partition of 2-digit addition.
    out = tmp_path / "eval.json"
    result = eval_main(
        [
            "model.path=builtin://tiny-qwen2-arith-sft",
            "data.val_files=builtin://arithmetic/test?size=795",
            f"output.path={out}",
        ]
    )
    card = json.load(open(os.path.join(CKPT, "warmstart.json")))
    assert 0.15 <= result["acc"] <= 0.50
    assert abs(result["acc"] - card["held_out_greedy_accuracy"]) < 1e-3  # greedy decoding on CPU is deterministic
    assert json.loads(out.read_text())["num_samples"] == 795
