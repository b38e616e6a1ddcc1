"""The devices the planner plans for: a table of common GPUs (memory, dense bf16 throughput, memory bandwidth:
vendors' data-sheet numbers) and this machine's own CPU memory or GPUs."""

from __future__ import annotations

import os
from dataclasses import dataclass

GIB = 2**30


@dataclass(frozen=True)
class Device:
    name: str
    memory_bytes: int
    bf16_tflops: float  # dense, no sparsity
    bandwidth_tbps: float  # memory bandwidth, TB/s
    has_bf16: bool = True
    platform: str = "cuda"  # cuda | rocm | cpu


GPUS: dict[str, Device] = {
    d.name: d
    for d in (
        Device("a100", 80 * GIB, 312, 2.04),
        Device("a100-40g", 40 * GIB, 312, 1.56),
        Device("a800", 80 * GIB, 312, 2.04),
        Device("h100", 80 * GIB, 989, 3.35),
        Device("h800", 80 * GIB, 989, 3.35),
        Device("h20", 96 * GIB, 148, 4.0),
        Device("h200", 141 * GIB, 989, 4.8),
        Device("b200", 180 * GIB, 2250, 8.0),
        Device("l40s", 48 * GIB, 362, 0.86),
        Device("a10g", 24 * GIB, 125, 0.6),
        Device("l4", 24 * GIB, 121, 0.3),
        Device("4090", 24 * GIB, 165, 1.0),
        Device("v100", 32 * GIB, 125, 0.9, has_bf16=False),
        Device("mi300x", 192 * GIB, 1307, 5.3, platform="rocm"),
    )
}


def gpu(name: str) -> Device:
    key = name.strip().lower().replace("_", "-")
    key = {"a100-80g": "a100", "h100-80g": "h100", "rtx4090": "4090", "a100-80gb": "a100", "a100-40gb": "a100-40g"}.get(
        key, key
    )
    if key not in GPUS:
        raise ValueError(f"--gpu_type {name!r} is not in the table: use one of {', '.join(GPUS)} (or --gpu_memory_gb)")
    return GPUS[key]


def meminfo_bytes(key: str) -> int:
    """A ``/proc/meminfo`` field in bytes (Linux), e.g. ``MemAvailable``."""
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    raise KeyError(key)


def this_machine() -> Device:
    """This machine's first GPU (its free memory), or its CPU memory (``MemAvailable``) where there is no GPU."""
    import torch

    if torch.cuda.is_available():
        free, _ = torch.cuda.mem_get_info(0)
        name = torch.cuda.get_device_name(0)
        return Device(name, int(free), 0.0, 0.0, platform="rocm" if torch.version.hip else "cuda")
    try:
        available = meminfo_bytes("MemAvailable")
    except (OSError, KeyError):
        available = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES")
    return Device("cpu", available, 0.0, 0.0, platform="cpu")
