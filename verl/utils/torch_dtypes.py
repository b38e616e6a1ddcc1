"""Reduced-precision compute (``torch.autocast``) for the actor's passes and the rollout, with a guard for CPUs that
emulate bf16/fp16.

On a CPU without native bf16 matmuls (no AVX512-BF16 / AMX: oneDNN reports no bf16 support) a bf16 matmul runs on a
slow fallback: measured on this project's AVX2 machine, 0.9 GFLOP/s against 133 GFLOP/s in fp32
(``python benchmarks/cpu_peak_flops.py``). Asking for bf16 there is almost certainly a mistake carried over from a
config written for another machine, so it is reported once, loudly, with the fix; it is not an error, because the
numerics are still right and a user may want them on purpose.
"""

from __future__ import annotations

import contextlib
import logging

import torch

logger = logging.getLogger(__name__)

AUTOCAST_DTYPES = {
    "fp32": None,
    "float32": None,
    "bf16": torch.bfloat16,
    "bfloat16": torch.bfloat16,
    "fp16": torch.float16,
    "float16": torch.float16,
}

_warned: set[str] = set()


def cpu_has_native(dtype: torch.dtype) -> bool:
    """Whether this CPU runs ``dtype`` matmuls natively (oneDNN's own check: AVX512-BF16/AMX for bf16, AVX512-FP16/AMX-FP16
    for fp16)."""
    try:
        if dtype == torch.bfloat16:
            return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
        if dtype == torch.float16:
            return bool(torch.ops.mkldnn._is_mkldnn_fp16_supported())
    except (AttributeError, RuntimeError):  # a torch build without oneDNN: no way to tell, assume the user knows
        return True
    return True


def autocast_context(device_type: str, dtype_name: str | None, key: str = "autocast_dtype"):
    """``torch.autocast(device_type, dtype)`` for ``bf16``/``fp16`` (the fp32 master weights stay as they are);
    ``fp32``/None: no autocast. ``key`` names the config key in errors and warnings."""
    name = str(dtype_name or "fp32").lower()
    if name not in AUTOCAST_DTYPES:
        raise ValueError(f"{key}={dtype_name!r}: use fp32, bf16 or fp16")
    dtype = AUTOCAST_DTYPES[name]
    if dtype is None:
        return contextlib.nullcontext()
    if device_type == "cpu" and not cpu_has_native(dtype) and key not in _warned:
        _warned.add(key)
        logger.warning(
            "%s=%s: this CPU (torch capability %s) has no native %s matmuls, so they run on a fallback that is ~100x "
            "slower than fp32 (measure it: python benchmarks/cpu_peak_flops.py). Set %s=fp32 on this machine.",
            key,
            name,
            torch.backends.cpu.get_cpu_capability(),
            name,
            key,
        )
    return torch.autocast(device_type=device_type, dtype=dtype)
