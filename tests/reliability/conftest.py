"""``tmpfs(size_mib)``: a real, small file system that fills up, mounted for one test (we run as root; without the
right to mount, the test is skipped with the reason)."""

from __future__ import annotations

import subprocess

import pytest


@pytest.fixture
def tmpfs(tmp_path):
    mounted = []

    def mount(size_mib: float, name: str = "disk") -> str:
        path = tmp_path / name
        path.mkdir()
        size = f"{max(1, round(size_mib * 1024))}k"
        proc = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], capture_output=True)
        if proc.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here (needs root): {proc.stderr.decode().strip()}")
        mounted.append(path)
        return str(path)

    yield mount
    for path in reversed(mounted):
        subprocess.run(["umount", "-l", str(path)], check=False)
