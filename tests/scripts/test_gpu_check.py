"""scripts/gpu_check.py in its CPU mode (gloo): the same collective, FSDP2 and trainer checks a GPU machine runs."""

import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("ray", reason="the trainer check runs the Ray backend: pip install 'ray[default]'")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.mark.slow
def test_gpu_check_cpu_mode_passes_every_check(tmp_path):
    out = subprocess.run(
        [
            sys.executable,
            os.path.join(ROOT, "scripts", "gpu_check.py"),
            "--device",
            "cpu",
            "--steps",
            "1",
            "--out-dir",
            str(tmp_path / "run"),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "HOME": str(tmp_path), "TQDM_DISABLE": "1"},
        cwd=ROOT,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    line = next(x for x in out.stdout.splitlines() if x.startswith("gpu_check: "))
    summary = json.loads(line.removeprefix("gpu_check: "))
    assert summary["world_size"] == 2
    assert summary["collectives_ok"] and summary["fsdp_ok"] and summary["trainer_ok"]
    assert summary["fsdp_loss"] > 0 and summary["last_step_timing_s"]["step"] > 0
