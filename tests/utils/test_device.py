"""`verl.utils.device` answers for the machine the test runs on, consistently with torch."""

import torch

from verl.utils import device


def test_device_answers_agree_with_torch():
    name = device.get_device_name()
    assert name == ("cuda" if torch.cuda.is_available() else "npu" if device.is_npu_available else "cpu")
    assert device.get_torch_device() is getattr(torch, name)
    assert device.get_nccl_backend() == {"cuda": "nccl", "npu": "hccl", "cpu": "gloo"}[name]
    assert isinstance(device.get_device_id(), int)
    assert device.get_visible_devices_keyword() in ("CUDA_VISIBLE_DEVICES", "ASCEND_RT_VISIBLE_DEVICES")


def test_collective_backend_runs_on_this_machine(tmp_path):
    """The backend named for this device can actually form a process group here (gloo on a CPU machine)."""
    import torch.distributed as dist

    store = dist.FileStore(str(tmp_path / "store"), 1)
    dist.init_process_group(device.get_nccl_backend(), store=store, rank=0, world_size=1)
    try:
        t = torch.ones(1, device=device.get_device_name())
        dist.all_reduce(t)
        assert t.item() == 1.0
    finally:
        dist.destroy_process_group()
