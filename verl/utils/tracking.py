"""Experiment tracking: one ``log(metrics, step)`` call fans out to the chosen backends.

``console`` prints a compact line, ``file`` appends JSON lines to ``<default_local_dir>/metrics.jsonl``,
``tensorboard`` writes event files under ``<default_local_dir>/tensorboard``. Optional backends are imported lazily
and a missing one names the ``pip install`` that adds it.
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Iterable, Mapping


def _fmt(v: float) -> str:
    if isinstance(v, float) and (abs(v) >= 1e4 or (v != 0 and abs(v) < 1e-3)):
        return f"{v:.3e}"
    return f"{v:.4f}" if isinstance(v, float) else str(v)


class ConsoleLogger:
    def __init__(self, keys: Iterable[str] | None = None, write=print):
        self.keys = list(keys) if keys else None
        self.write = write

    def log(self, metrics: Mapping[str, float], step: int) -> None:
        shown = {k: metrics[k] for k in self.keys if k in metrics} if self.keys else metrics
        self.write(f"step {step}: " + " ".join(f"{k}={_fmt(v)}" for k, v in shown.items()))

    def close(self) -> None:
        pass


class FileLogger:
    """JSON lines, one per log call, flushed at once so a killed run keeps everything it logged."""

    def __init__(self, path: str):
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        self.path = path
        self._f = open(path, "a")

    def log(self, metrics: Mapping[str, float], step: int) -> None:
        clean = {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in metrics.items()}
        self._f.write(json.dumps({"step": step, "time": time.time(), **clean}) + "\n")
        self._f.flush()

    def close(self) -> None:
        self._f.close()


class TensorBoardLogger:
    def __init__(self, log_dir: str):
        try:
            from torch.utils.tensorboard import SummaryWriter
        except ImportError as e:
            raise ImportError("trainer.logger includes 'tensorboard': pip install tensorboard") from e
        self._w = SummaryWriter(log_dir=log_dir)

    def log(self, metrics: Mapping[str, float], step: int) -> None:
        for k, v in metrics.items():
            if isinstance(v, (int, float)):
                self._w.add_scalar(k, v, step)
        self._w.flush()

    def close(self) -> None:
        self._w.close()


class Tracking:
    """``Tracking(backends=["console", "file"], log_dir=...)``; ``log`` sends each metrics dict to every backend."""

    SUPPORTED = ("console", "file", "tensorboard")

    def __init__(
        self,
        backends: str | Iterable[str],
        log_dir: str,
        console_keys: Iterable[str] | None = None,
        write=print,
        config=None,  # the run's config, for backends that record it (wandb, mlflow)
    ):
        backends = [backends] if isinstance(backends, str) else list(backends)
        self.loggers = []
        for name in backends:
            if name == "console":
                self.loggers.append(ConsoleLogger(console_keys, write=write))
            elif name == "file":
                self.loggers.append(FileLogger(os.path.join(log_dir, "metrics.jsonl")))
            elif name == "tensorboard":
                self.loggers.append(TensorBoardLogger(os.path.join(log_dir, "tensorboard")))
            else:
                raise ValueError(f"unknown logger {name!r} in trainer.logger; supported: {self.SUPPORTED}")

    def log(self, data: Mapping[str, float], step: int) -> None:
        for logger in self.loggers:
            logger.log(data, step)

    def close(self) -> None:
        for logger in self.loggers:
            logger.close()
