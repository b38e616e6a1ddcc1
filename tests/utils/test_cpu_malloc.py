"""`retain_freed_memory`: a large buffer freed and allocated again is reused instead of page-faulted back in (glibc).
Each case runs in a fresh interpreter, since the setting is process-wide."""

from __future__ import annotations

import platform
import subprocess
import sys

import pytest

SCRIPT = """
import resource, sys, torch
from verl.utils.cpu_malloc import retain_freed_memory
applied = retain_freed_memory() if sys.argv[1] == "retain" else False
def one_pass():  # a forward/backward-like pattern: buffers of several sizes (8-64 MB) live together, then all freed
    kept = [torch.ones(n << 20) for n in (16, 2, 8, 12, 4, 16)]
    del kept
for _ in range(3):  # warm up: the heap grows to the pass's peak
    one_pass()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(10):
    one_pass()
print(applied, resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def faults(mode: str) -> tuple[bool, int]:
    out = subprocess.run([sys.executable, "-c", SCRIPT, mode], capture_output=True, text=True, check=True).stdout
    applied, count = out.split()
    return applied == "True", int(count)


@pytest.mark.slow
@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallopt is glibc's")
def test_retained_memory_is_reused_without_page_faults():
    applied, retained = faults("retain")
    _, default = faults("default")
    assert applied
    assert default > 10 * 4096  # by default: the large buffers are fresh pages in every pass (~60k faults per pass)
    assert retained < default / 4  # typically 0-16k against ~530k; alignment splits leave an occasional hole
