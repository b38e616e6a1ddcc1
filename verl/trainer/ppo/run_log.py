"""Where a run's metrics go: the configured loggers (``trainer.logger``; ``verl.utils.tracking``) and the in-memory
history the Python API and the tuner read."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from tqdm import tqdm

from verl.utils.tracking import Tracking

CONSOLE_KEYS = [
    "critic/score/mean",
    "val-core/acc",
    "actor/pg_loss",
    "actor/entropy",
    "response_length/mean",
    "timing_s/step",
]


class RunLog:
    """``log(metrics, step)`` to the loggers (opened by ``open``, flushed and closed by ``close``, reopened by the
    next ``open``) and to ``history``: ``{metric: [(step, value), ...]}``."""

    def __init__(self, config: Any, run_dir: str):
        self.config, self.run_dir = config, run_dir
        self.history: dict[str, list] = defaultdict(list)
        self._tracking: Tracking | None = None

    def open(self) -> None:
        if self._tracking is None:
            loggers = self.config.trainer.logger
            self._tracking = Tracking(
                default_backend=loggers,
                config=self.config,
                log_dir=self.run_dir,
                console_keys=CONSOLE_KEYS,
                write=tqdm.write,
            )

    def log(self, metrics: dict[str, float], step: int) -> None:
        if self._tracking is not None:
            self._tracking.log(metrics, step=step)
        for k, v in metrics.items():
            if isinstance(v, (int, float)):
                self.history[k].append((step, v))

    def close(self) -> None:
        if self._tracking is not None:
            self._tracking.close()
            self._tracking = None
