"""Where a run's metrics go: the configured loggers (``trainer.logger``; ``verl.utils.tracking``) and the in-memory
history the Python API and the tuner read.

A run resumed from step N's checkpoint computes the steps after N again; their records in the file logger's
``metrics.jsonl`` (written before the run stopped) move to ``metrics.replaced.jsonl`` when it opens, so the file holds
each step once and nothing written is lost, and
a checkpoint is committed only once its step's record is written (``on_logged``), so no step's record is missing."""

from __future__ import annotations

import os
from collections import defaultdict
from collections.abc import Callable
from typing import Any

from tqdm import tqdm

from verl.utils.failpoints import failpoint
from verl.utils.tracking import METRICS_FILE, Tracking, replaced_records_path, rewind_metrics_file

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
    next ``open``) and to ``history``: ``{metric: [(step, value), ...]}``. ``on_logged(step)`` runs after each
    record is written (the trainer commits the step's checkpoint there)."""

    def __init__(self, config: Any, run_dir: str, on_logged: Callable[[int], None] | None = None):
        self.config, self.run_dir, self.on_logged = config, run_dir, on_logged
        self.history: dict[str, list] = defaultdict(list)
        self._tracking: Tracking | None = None
        self._rewound = False

    def open(self, step: int = 0) -> None:
        """Open the loggers; the first time, for a run going on from ``step``'s checkpoint, drop the file logger's
        records of later steps (and all of them when it starts from no checkpoint): this run logs them again.
        ``trainer.resume_mode=disable`` keeps the file as it is (the records of the run it starts over from), and so
        does ``trainer.val_only`` (it trains no step: it adds its validation to the run's records)."""
        if not self._rewound:
            self._rewound = True
            self._rewind(step)
        if self._tracking is None:
            t = self.config.trainer
            self._tracking = Tracking(
                project_name=t.project_name,
                experiment_name=t.experiment_name,
                default_backend=t.logger,
                config=self.config,
                log_dir=self.run_dir,
                console_keys=CONSOLE_KEYS,
                write=tqdm.write,
            )

    def _rewind(self, step: int) -> None:
        t = self.config.trainer
        path = os.path.join(self.run_dir, METRICS_FILE)
        loggers = [t.logger] if isinstance(t.logger, str) else list(t.logger)
        keep_all = getattr(t, "resume_mode", "auto") == "disable" or getattr(t, "val_only", False)
        if "file" not in loggers or keep_all or not os.path.isfile(path):
            return
        dropped, broken = rewind_metrics_file(path, keep_through=step if step > 0 else -1)
        if dropped or broken:
            which = f"of steps after {step}" if step > 0 else "of a run that committed no checkpoint"
            tqdm.write(
                f"{path}: moved {dropped} records {which} (this run computes them again)"
                + (f" and {broken} partly written lines" if broken else "")
                + f" to {os.path.basename(replaced_records_path(path))}"
            )

    def log(self, metrics: dict[str, float], step: int) -> None:
        if self._tracking is not None:
            self._tracking.log(metrics, step=step)
        for k, v in metrics.items():
            if isinstance(v, (int, float)):
                self.history[k].append((step, v))
        failpoint("metrics.logged")
        if self.on_logged is not None:
            self.on_logged(step)

    def close(self) -> None:
        if self._tracking is not None:
            self._tracking.close()
            self._tracking = None
