"""Experiment tracking: one ``log(metrics, step)`` call fans out to the chosen backends.

``console`` prints a compact line, ``file`` appends JSON lines to ``<default_local_dir>/metrics.jsonl``,
``tensorboard`` writes event files under ``<default_local_dir>/tensorboard``, ``wandb`` (offline unless configured)
and ``mlflow`` (a local store under ``<default_local_dir>/mlruns`` unless ``MLFLOW_TRACKING_URI`` is set) when
installed. Optional backends are imported lazily
and a missing one names the ``pip install`` that adds it.
"""

from __future__ import annotations

import errno
import json
import math
import os
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from verl.utils.disk import DiskFullError

METRICS_FILE = "metrics.jsonl"  # the file logger's file in a run directory


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


def _json_value(v):
    """A metric as JSON: numpy/tensor scalars as Python numbers, NaN/inf as null."""
    if hasattr(v, "item") and getattr(v, "ndim", None) == 0:
        v = v.item()
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v


class FileLogger:
    """JSON lines, one per log call, each written whole by one ``write`` and at once, so a killed run keeps everything
    it logged. A write that fails (a full disk) is cut back: the file never ends in half a record."""

    def __init__(self, path: str):
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        self.path = path
        self._fd: int | None = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def log(self, metrics: Mapping[str, float], step: int) -> None:
        clean = {k: _json_value(v) for k, v in metrics.items()}
        line = (json.dumps({"step": step, "time": time.time(), **clean}) + "\n").encode()
        start = os.lseek(self._fd, 0, os.SEEK_END)
        try:
            written = 0
            while written < len(line):
                written += os.write(self._fd, line[written:])
        except OSError as e:
            os.ftruncate(self._fd, start)
            if e.errno in (errno.ENOSPC, errno.EDQUOT):
                raise DiskFullError(
                    f"no space left on the device of {self.path} writing step {step}'s metrics: the records before "
                    "it are intact. Free space on that file system (or point the run directory elsewhere) and run "
                    "the same command again to resume from the last checkpoint."
                ) from e
            raise

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def rewind_metrics_file(path: str, keep_through: int) -> tuple[int, int]:
    """Keep the records of ``path`` (JSON lines with a ``step``) whose step is at most ``keep_through``; the others
    and any line a killed writer left half-written move to `replaced_records_path` (appended: nothing written is
    lost), and ``path`` is replaced whole (a crash here leaves it as it was). Returns (records moved, broken lines)."""
    kept, moved, dropped, broken = [], [], 0, 0
    with open(path, "rb") as f:
        for line in f:
            try:
                record = json.loads(line) if line.endswith(b"\n") else None
            except ValueError:
                record = None
            if not isinstance(record, dict):
                broken += bool(line.strip())
                moved += [line.rstrip(b"\n") + b"\n"] if line.strip() else []
            elif isinstance(record.get("step"), int) and record["step"] > keep_through:
                dropped += 1
                moved.append(line)
            else:
                kept.append(line)
    if dropped or broken:
        with open(replaced_records_path(path), "ab") as f:
            f.writelines(moved)
        with open(path + ".tmp", "wb") as f:
            f.writelines(kept)
        os.replace(path + ".tmp", path)
    return dropped, broken


def replaced_records_path(path: str) -> str:
    """Where `rewind_metrics_file` keeps the records it takes out: ``metrics.jsonl`` -> ``metrics.replaced.jsonl``."""
    root, ext = os.path.splitext(path)
    return f"{root}.replaced{ext or '.jsonl'}"


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


class WandbLogger:
    """Weights & Biases; offline (files under ``<log_dir>/wandb``) unless WANDB_MODE says otherwise or an API key is set."""

    def __init__(self, log_dir: str, project: str, experiment: str, config=None):
        try:
            import wandb
        except ImportError as e:
            raise ImportError("trainer.logger includes 'wandb': pip install wandb") from e
        mode = os.environ.get("WANDB_MODE") or ("online" if os.environ.get("WANDB_API_KEY") else "offline")
        os.makedirs(log_dir, exist_ok=True)
        self._run = wandb.init(
            project=project, name=experiment, dir=log_dir, mode=mode, config=_plain(config), reinit="finish_previous"
        )

    def log(self, metrics: Mapping[str, float], step: int) -> None:
        self._run.log(dict(metrics), step=step)

    def close(self) -> None:
        self._run.finish()


class MlflowLogger:
    """MLflow; a local file store under ``<log_dir>/mlruns`` unless MLFLOW_TRACKING_URI names a server."""

    def __init__(self, log_dir: str, project: str, experiment: str, config=None):
        try:
            import mlflow
        except ImportError as e:
            raise ImportError("trainer.logger includes 'mlflow': pip install mlflow (or mlflow-skinny)") from e
        uri = os.environ.get("MLFLOW_TRACKING_URI")
        if not uri:
            os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")  # a local, serverless store is the point here
            uri = "file:" + os.path.abspath(os.path.join(log_dir, "mlruns"))
        self._mlflow = mlflow
        mlflow.set_tracking_uri(uri)
        mlflow.set_experiment(project)
        self.run = mlflow.start_run(run_name=experiment)
        flat = _flatten_config(_plain(config) or {})
        if flat:
            mlflow.log_params({k: str(v)[:500] for k, v in flat.items()})

    def log(self, metrics: Mapping[str, float], step: int) -> None:
        # MLflow names allow letters, digits, _ - . space : / only
        clean = {k.replace("@", "_at_"): float(v) for k, v in metrics.items() if isinstance(v, (int, float))}
        self._mlflow.log_metrics(clean, step=step)

    def close(self) -> None:
        self._mlflow.end_run()


def _plain(config):
    if config is None:
        return None
    from verl.utils.config import to_container  # a loaded config, a DictConfig or a dict: nested plain dicts

    return to_container(config)


def _flatten_config(tree: Mapping, prefix: str = "") -> dict:
    out = {}
    for k, v in tree.items():
        if isinstance(v, Mapping):
            out.update(_flatten_config(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


class Tracking:
    """One ``log(metrics, step)`` call to every backend of ``default_backend`` (verl's signature):

        Tracking(project_name="verl", experiment_name="gsm8k", default_backend=["console", "file"], config=cfg)

    ``log_dir``: where ``file`` (``metrics.jsonl``), ``tensorboard`` and the local ``wandb``/``mlflow`` stores
    write. Without it the places are verl's: ``$VERL_FILE_LOGGER_PATH`` or
    ``$VERL_FILE_LOGGER_ROOT/<project>/<experiment>.jsonl`` for ``file``, ``$TENSORBOARD_DIR`` or
    ``tensorboard_log/<project>/<experiment>`` for ``tensorboard``, the working directory for the others.
    ``console_keys``: the metrics the console line shows (all by default); ``write``: where it goes. ``config`` is
    what the backends record; the run's names are the caller's (``trainer.project_name`` / ``experiment_name`` of a
    job), by default ``verl`` and the log directory's name (else ``run``)."""

    SUPPORTED = ("console", "file", "tensorboard", "wandb", "mlflow")
    supported_backend = list(SUPPORTED)  # verl's attribute name

    def __init__(
        self,
        project_name: str | None = None,
        experiment_name: str | None = None,
        default_backend: str | Iterable[str] = "console",
        config=None,  # the run's config, for backends that record it (wandb, mlflow)
        *,
        log_dir: str | None = None,
        console_keys: Iterable[str] | None = None,
        write=print,
    ):
        if project_name is not None and not isinstance(project_name, str):
            # the form this package used before verl's signature: Tracking(backends, log_dir, ...)
            project_name, experiment_name, default_backend, log_dir = None, None, project_name, experiment_name
        backends = [default_backend] if isinstance(default_backend, str) else list(default_backend)
        self.project_name = project_name or "verl"
        self.experiment_name = experiment_name or (os.path.basename(log_dir) if log_dir else "run")
        self.logger: dict[str, Any] = {}
        for name in backends:
            if name in self.logger:
                continue
            if name == "console":
                self.logger[name] = ConsoleLogger(console_keys, write=write)
            elif name == "file":
                self.logger[name] = FileLogger(self._file_path(log_dir))
            elif name == "tensorboard":
                self.logger[name] = TensorBoardLogger(self._tensorboard_dir(log_dir))
            elif name in ("wandb", "mlflow"):
                cls = WandbLogger if name == "wandb" else MlflowLogger
                self.logger[name] = cls(log_dir or os.getcwd(), self.project_name, self.experiment_name, config)
            else:
                raise ValueError(f"unknown logger {name!r} in trainer.logger; supported: {self.SUPPORTED}")

    @property
    def loggers(self) -> list:
        return list(self.logger.values())

    def _file_path(self, log_dir: str | None) -> str:
        if log_dir is not None:
            return os.path.join(log_dir, METRICS_FILE)
        if os.environ.get("VERL_FILE_LOGGER_PATH"):
            return os.environ["VERL_FILE_LOGGER_PATH"]
        root = os.path.expanduser(os.environ.get("VERL_FILE_LOGGER_ROOT", "."))
        return os.path.join(root, self.project_name, f"{self.experiment_name}.jsonl")

    def _tensorboard_dir(self, log_dir: str | None) -> str:
        if log_dir is not None:
            return os.path.join(log_dir, "tensorboard")
        default = os.path.join("tensorboard_log", self.project_name, self.experiment_name)
        return os.environ.get("TENSORBOARD_DIR", default)

    def log(self, data: Mapping[str, float], step: int, backend: Iterable[str] | None = None) -> None:
        """Send ``data`` to every backend, or only to those named in ``backend``."""
        for name, logger in self.logger.items():
            if backend is None or name in backend:
                logger.log(data, step)

    def close(self) -> None:
        """Flush and close every backend (a finished wandb/mlflow run); idempotent."""
        loggers, self.logger = self.logger, {}
        for logger in loggers.values():
            logger.close()

    finish = close  # verl's name


@dataclass
class ValidationGenerationsLogger:
    """Validation samples to the experiment trackers that show tables or text (verl's class): ``log(loggers,
    samples, step)`` with ``samples`` a list of ``(input, output, score)``. ``wandb`` gets one table row per step
    (all of the step's samples side by side), ``mlflow`` a ``val_step<N>.json`` artifact, ``tensorboard`` a text
    entry; other backends are skipped (``console`` and ``file`` runs keep their samples in
    ``val_generations.jsonl``, written by the trainer)."""

    project_name: str | None = None
    experiment_name: str | None = None

    def log(self, loggers: Iterable[str], samples: list[tuple], step: int) -> None:
        loggers = [loggers] if isinstance(loggers, str) else list(loggers)
        if "wandb" in loggers:
            self._to_wandb(samples, step)
        if "mlflow" in loggers:
            self._to_mlflow(samples, step)
        if "tensorboard" in loggers:
            self._to_tensorboard(samples, step)

    def _to_wandb(self, samples: list[tuple], step: int) -> None:
        import wandb

        columns = ["step"] + [f"{k}_{i + 1}" for i in range(len(samples)) for k in ("input", "output", "score")]
        rows = getattr(self, "_wandb_rows", [])
        self._wandb_rows = rows + [[step] + [v for sample in samples for v in sample]]
        if wandb.run is not None:  # a fresh table each time: wandb does not re-log a mutated one
            wandb.log({"val/generations": wandb.Table(columns=columns, data=self._wandb_rows)}, step=step)

    def _to_mlflow(self, samples: list[tuple], step: int) -> None:
        import tempfile

        import mlflow

        rows = [{"input": s[0], "output": s[1], "score": s[2]} for s in samples]
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, f"val_step{step}.json")
            with open(path, "w") as f:
                json.dump(rows, f, default=_json_value)
            mlflow.log_artifact(path)

    def _to_tensorboard(self, samples: list[tuple], step: int) -> None:
        if getattr(self, "_writer", None) is None:
            from torch.utils.tensorboard import SummaryWriter

            default = os.path.join("tensorboard_log", self.project_name or "verl", self.experiment_name or "run")
            self._writer = SummaryWriter(log_dir=os.environ.get("TENSORBOARD_DIR", default))
        text = "\n\n".join(f"**input:** {s[0]}\n\n**output:** {s[1]}\n\n**score:** {s[2]}" for s in samples)
        self._writer.add_text("val/generations", text, step)
        self._writer.flush()
