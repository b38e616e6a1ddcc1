"""benchmarks/agent_loop_throughput.py runs end to end in its smoke setting and reports every field (not timed)."""

from __future__ import annotations

import importlib.util
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.mark.slow
def test_agent_loop_throughput_quick(tmp_path):
    spec = importlib.util.spec_from_file_location(
        "agent_loop_throughput", os.path.join(ROOT, "benchmarks", "agent_loop_throughput.py")
    )
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    md = tmp_path / "table.md"
    out = bench.main(["--quick", "--md", str(md)])
    assert list(out["results"]) == ["concurrent, lockstep", "concurrent", "one at a time"]
    for r in out["results"].values():
        assert r["trajectories_per_s"] > 0 and r["model_tokens_per_s"] > 0 and r["decode_batches"] > 0
    assert out["results"]["concurrent, lockstep"]["mean_batch"] == 4.0  # every round's turns in one decode
    assert out["results"]["one at a time"]["mean_batch"] == 1.0
    assert "| one at a time |" in md.read_text()
