"""``Worker``: what every role worker knows about its place in a group (rank, world size, device)."""

from __future__ import annotations

import os

import torch

DEVICES = ("cpu", "cuda")


class Worker:
    """Rank and world size come from the process group when one is up (Ray backend: one process per rank), else
    the worker is the only rank (local backend). The device is bound by the worker group that builds the worker
    (``bind_device``); a worker built by hand outside a group runs on the CPU."""

    _device: torch.device | None = None

    def _register_dispatch_collect_info(self, mesh_name: str, dp_rank: int, is_collect: bool) -> None:
        """Declare this rank's data-parallel rank in the device mesh ``mesh_name`` and whether its result is
        collected (verl's n-d dispatch: `make_nd_compute_dataproto_dispatch_fn`)."""
        if not hasattr(self, "_mesh_info"):
            self._mesh_info: dict[str, tuple[int, bool]] = {}
        self._mesh_info[mesh_name] = (int(dp_rank), bool(is_collect))

    def _query_dispatch_info(self, mesh_name: str) -> int:
        return self._mesh_entry(mesh_name)[0]

    def _query_collect_info(self, mesh_name: str) -> bool:
        return self._mesh_entry(mesh_name)[1]

    def _mesh_entry(self, mesh_name: str) -> tuple[int, bool]:
        info = getattr(self, "_mesh_info", {})
        if mesh_name not in info:
            raise KeyError(
                f"{type(self).__name__} rank {self.rank} registered no dispatch info for mesh {mesh_name!r} (call "
                f"self._register_dispatch_collect_info({mesh_name!r}, dp_rank, is_collect) in __init__); it has "
                f"{sorted(info)}"
            )
        return info[mesh_name]

    def bind_device(self, device: str) -> None:
        """Run on ``device`` (``cpu`` or ``cuda``: this process's current CUDA device). A CUDA request on a machine
        whose torch sees no CUDA device is an error, never a silent CPU run."""
        if device not in DEVICES:
            raise ValueError(f"worker device {device!r}: use one of {DEVICES}")
        if device == "cuda":
            if not torch.cuda.is_available():
                raise RuntimeError(
                    f"{type(self).__name__}: trainer.device=cuda but torch sees no CUDA device in this process "
                    "(check the GPUs and torch's build, or use trainer.device=cpu)"
                )
            self._device = torch.device("cuda", torch.cuda.current_device())
        else:
            self._device = torch.device("cpu")

    @property
    def rank(self) -> int:
        """The process group's rank; before the group is up, a worker of a verl-style Ray group (which leaves
        ``init_process_group`` to the worker) reads it from ``RANK``, as verl's workers do."""
        if _dist_up():
            return torch.distributed.get_rank()
        return int(os.environ.get("RANK", 0)) if _in_verl_style_group() else 0

    @property
    def world_size(self) -> int:
        if _dist_up():
            return torch.distributed.get_world_size()
        return int(os.environ.get("WORLD_SIZE", 1)) if _in_verl_style_group() else 1

    @property
    def distributed(self) -> bool:
        """Whether this worker is one rank of a process group it shards over. A worker of the local backend never
        is, even when a library in the process (vLLM's engine) has started a one-process group of its own."""
        return _dist_up() and not getattr(self, "_local_backend", False)

    @property
    def device(self) -> torch.device:
        return self._device if self._device is not None else torch.device("cpu")

    def to_device(self, data):
        """``data`` (a DataProto) on this worker's device, as a new object (the caller's batch stays where it is);
        unchanged on CPU."""
        if self.device.type == "cpu" or data.batch is None:
            return data
        from verl.protocol import DataProto

        batch = {k: v.to(self.device) for k, v in data.batch.items()}
        return DataProto(batch=batch, non_tensor_batch=dict(data.non_tensor_batch), meta_info=dict(data.meta_info))

    @staticmethod
    def to_host(data):
        """A result DataProto back on the CPU for the controller."""
        on_device = data.batch is not None and any(t.device.type != "cpu" for t in data.batch.values())
        return data.to("cpu") if on_device else data


def _dist_up() -> bool:
    return torch.distributed.is_available() and torch.distributed.is_initialized()


def _in_verl_style_group() -> bool:
    """Whether this process is a rank of a `RayWorkerGroup` built verl's way (it sets ``WG_BACKEND=ray``)."""
    return os.environ.get("WG_BACKEND") == "ray"
