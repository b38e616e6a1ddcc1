"""The memory model's formulas against hand-computed values, and its estimate against the measured peak of a real
run (the full comparison on four configurations is ``benchmarks/memory_planner.py``)."""

from __future__ import annotations

import importlib.util
import os

import pytest

from verl.planner.memory import (
    PlanInputs,
    adam_state_bytes,
    estimate_memory,
    kv_cache_bytes,
    layer_activation_elements,
    logits_bytes,
    micro_batch_tokens,
    training_activation_bytes,
)
from verl.planner.shapes import ModelShape

SHAPE = ModelShape("t", hidden_size=8, num_layers=2, num_heads=2, num_kv_heads=1, intermediate_size=16, vocab_size=10)


def test_adamw_moments_are_two_float32_per_trainable_parameter_sharded():
    assert adam_state_bytes(1000, world_size=1, offloaded=False) == 8000
    assert adam_state_bytes(1000, world_size=8, offloaded=False) == 1000
    assert adam_state_bytes(1000, world_size=8, offloaded=True) == 0


def test_saved_activations_per_layer_and_token():
    # h=8, kv=4, I=16: 9*8 + 2*4 + 4*16 = 144 elements
    assert layer_activation_elements(SHAPE) == 144
    assert training_activation_bytes(SHAPE, tokens=3, compute_bytes=2, checkpointing=False) == 2 * 144 * 3 * 2
    # checkpointing: each layer's input (h) plus one layer in full
    assert training_activation_bytes(SHAPE, tokens=3, compute_bytes=2, checkpointing=True) == 2 * 8 * 3 * 2 + 144 * 6


def test_logits_and_kv_cache():
    # the lm_head at 5 positions (bf16), float32 work at the 3 response positions
    assert logits_bytes(SHAPE, output_tokens=5, response_tokens=3, compute_bytes=2) == 10 * (5 * 2 + 3 * 16)
    assert kv_cache_bytes(SHAPE, tokens=7, bytes_each=2) == 2 * 2 * 4 * 7 * 2
    assert kv_cache_bytes(SHAPE, tokens=7, bytes_each=2, tp=2) == 2 * 4 * 7 * 2


def test_micro_batches_count_tokens_and_shared_prompts():
    inp = PlanInputs(SHAPE, 2**30, prompt_len=10, response_len=20, rollout_n=4, micro_rows=8)
    assert micro_batch_tokens(inp, training=True) == (8 * 30, 8 * 20)
    inp.shared_prefix = True  # 2 distinct prompts forwarded once; logits at response positions only
    assert micro_batch_tokens(inp, training=True) == (2 * 10 + 8 * 20, 8 * 20)
    inp.micro_tokens = 90  # a token budget: 3 full-length rows
    assert micro_batch_tokens(inp, training=True) == (10 + 3 * 20, 3 * 20)


def test_phases_and_peak():
    inp = PlanInputs(SHAPE, 2**30, platform="cuda", world_size=2, rollout_engine="vllm", gpu_memory_utilization=0.5)
    est = estimate_memory(inp)
    assert set(est.phases) == {"rollout", "log_prob", "update"}
    assert est.phases["rollout"]["vllm reservation"] == 2**29
    assert est.peak_phase == "rollout" and est.peak_bytes == est.total("rollout")
    assert "gradients" in est.phases["update"] and "gradients" not in est.phases["rollout"]


def test_lora_keeps_no_reference_copy_and_adapter_moments_only():
    full = estimate_memory(PlanInputs(SHAPE, 2**30, reference=True)).phases["update"]
    lora = estimate_memory(PlanInputs(SHAPE, 2**30, reference=True, lora_rank=2)).phases["update"]
    assert "reference params" in full and "reference params" not in lora
    assert lora["actor AdamW moments"] == 8 * SHAPE.lora_params(2)


@pytest.mark.slow
def test_the_estimate_is_within_25_percent_of_a_real_runs_peak(tmp_path):
    """A real 2-step main_ppo run in a fresh process (the benchmark's smoke configuration)."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    spec = importlib.util.spec_from_file_location(
        "memory_planner", os.path.join(root, "benchmarks", "memory_planner.py")
    )
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    result = bench.run_one("smoke", str(tmp_path))
    assert 0.75 <= result["estimated"] / result["measured"] <= 1.25, result


def test_the_chunked_log_prob_pass_halves_the_float32_logits_work():
    # V = 10, 5 lm_head positions in bf16, 3 response positions: 8 instead of 16 float32 bytes each, plus a chunk
    chunk = 3  # fewer rows than one chunk of 2^23 elements
    assert logits_bytes(SHAPE, 5, 3, 2, chunked=True) == 10 * (5 * 2 + 3 * 8 + chunk * 16)
    # a 2^20 vocabulary: chunks of 8 rows, far fewer than the micro-batch's 64 x 1024 response tokens
    big = ModelShape("v", 8, 2, 2, 1, 16, vocab_size=2**20)
    plain = estimate_memory(PlanInputs(big, 2**30, micro_rows=64)).phases["update"]["logits"]
    chunked = estimate_memory(PlanInputs(big, 2**30, micro_rows=64, chunked_logprobs=True)).phases["update"]["logits"]
    assert 0.4 < chunked / plain < 0.6
