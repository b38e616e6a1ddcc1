"""``Worker``: what every role worker knows about its place in a group (rank, world size, device)."""

from __future__ import annotations

import os

import torch


class Worker:
    """Rank and world size come from the process group when one is up (Ray backend: one process per rank), else
    the worker is the only rank (local backend)."""

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
        if os.environ.get("VERL_DEVICE", "cpu") == "cuda" and torch.cuda.is_available():
            return torch.device("cuda", torch.cuda.current_device())
        return torch.device("cpu")

    def to_device(self, data):
        """``data`` (a DataProto) on this worker's device, as a new object (the caller's batch stays where it is);
        unchanged on CPU."""
        if self.device.type == "cpu" or not data.batch:
            return data
        from verl.protocol import DataProto

        batch = {k: v.to(self.device) for k, v in data.batch.items()}
        return DataProto(batch=batch, non_tensor_batch=dict(data.non_tensor_batch), meta_info=dict(data.meta_info))

    @staticmethod
    def to_host(data):
        """A result DataProto back on the CPU for the controller."""
        return data.to("cpu") if data.batch and any(t.device.type != "cpu" for t in data.batch.values()) else data


def _dist_up() -> bool:
    return torch.distributed.is_available() and torch.distributed.is_initialized()
