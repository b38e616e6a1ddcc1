"""Which accelerator this process runs on, under verl's names (``verl.utils.device``).

Code written for verl asks these functions instead of hard-coding CUDA: ``get_device_name()`` is ``"cuda"`` with a
CUDA device, ``"npu"`` with an Ascend NPU (torch_npu), else ``"cpu"``; ``get_torch_device()`` is the matching torch
module (``torch.cuda``, ``torch.npu``, ``torch.cpu``), so ``get_torch_device().synchronize()`` and friends run on
any of them. ``get_nccl_backend()`` is the collective backend for that device: NCCL for CUDA, HCCL for NPU and gloo
for a CPU-only process (verl answers NCCL there, which cannot run without a GPU).
"""

from __future__ import annotations

import torch

__all__ = [
    "get_device_id",
    "get_device_name",
    "get_nccl_backend",
    "get_resource_name",
    "get_torch_device",
    "get_visible_devices_keyword",
    "is_cuda_available",
    "is_npu_available",
    "is_torch_npu_available",
]


def is_torch_npu_available(check_device: bool = True) -> bool:
    """Whether torch has the Ascend NPU extension (``check_device``: and sees a device)."""
    npu = getattr(torch, "npu", None)
    if npu is None:
        return False
    try:
        return bool(npu.is_available()) if check_device else True
    except Exception:  # a broken torch_npu install answers "no NPU", not a crash at import
        return False


# module-level flags, as in verl (read once at import: the devices of a process do not change)
is_cuda_available: bool = torch.cuda.is_available()
is_npu_available: bool = is_torch_npu_available()


def get_device_name() -> str:
    """``"cuda"``, ``"npu"`` or ``"cpu"``: the accelerator this process computes on."""
    if is_cuda_available:
        return "cuda"
    if is_npu_available:
        return "npu"
    return "cpu"


def get_torch_device():
    """The torch module of `get_device_name` (``torch.cuda``, ``torch.npu`` or ``torch.cpu``)."""
    return getattr(torch, get_device_name())


def get_device_id() -> int:
    """Index of the current device (0 on the CPU)."""
    return get_torch_device().current_device() if get_device_name() != "cpu" else 0


def get_nccl_backend() -> str:
    """The ``torch.distributed`` backend for this device: ``nccl`` (CUDA), ``hccl`` (NPU) or ``gloo`` (CPU)."""
    return {"cuda": "nccl", "npu": "hccl"}.get(get_device_name(), "gloo")


def get_resource_name() -> str:
    """The Ray resource an accelerator is scheduled by: ``"NPU"`` on Ascend, else ``"GPU"``."""
    return "NPU" if is_npu_available and not is_cuda_available else "GPU"


def get_visible_devices_keyword() -> str:
    """The environment variable that limits the devices a process sees."""
    return "ASCEND_RT_VISIBLE_DEVICES" if is_torch_npu_available(check_device=False) else "CUDA_VISIBLE_DEVICES"
