"""Shared by the example tests: run an example script as a user would, from the repository root."""

from __future__ import annotations

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def run_example_script(relative_path: str, *args: str, timeout: int = 600) -> str:
    """``python <ROOT>/<relative_path> args...`` in ROOT; its stdout, after asserting it exited 0."""
    out = subprocess.run(
        [sys.executable, os.path.join(ROOT, relative_path), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "PYTHONPATH": ROOT},
        cwd=ROOT,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout
