"""``Worker``: what every role worker knows about its place in a group (rank, world size, device)."""

from __future__ import annotations

import torch

DEVICES = ("cpu", "cuda")


class Worker:
    """Rank and world size come from the process group when one is up (Ray backend: one process per rank), else
    the worker is the only rank (local backend). The device is bound by the worker group that builds the worker
    (``bind_device``); a worker built by hand outside a group runs on the CPU."""

    _device: torch.device | None = None

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
        return torch.distributed.get_rank() if _dist_up() else 0

    @property
    def world_size(self) -> int:
        return torch.distributed.get_world_size() if _dist_up() else 1

    @property
    def distributed(self) -> bool:
        return _dist_up()

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
