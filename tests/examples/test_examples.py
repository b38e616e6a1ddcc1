"""Every example runs (with a small budget) and does what it says."""

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_quickstart_sft_example(tmp_path):
    out = subprocess.run(
        [
            sys.executable,
            os.path.join(ROOT, "examples", "quickstart_sft.py"),
            "--out-dir",
            str(tmp_path),
            "--steps",
            "4",
            "--train-size",
            "256",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": ROOT},
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert "held-out greedy accuracy" in out.stdout
    assert (tmp_path / "tiny-qwen2" / "config.json").exists()
    assert (tmp_path / "data" / "train.parquet").exists()
    assert (tmp_path / "sft" / "global_step_4" / "model.safetensors").exists()
