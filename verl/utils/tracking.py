"""Experiment tracking: one ``log(metrics, step)`` call fans out to the chosen backends.

``console`` prints a compact line, ``file`` appends JSON lines to ``<default_local_dir>/metrics.jsonl``,
``tensorboard`` writes event files under ``<default_local_dir>/tensorboard``, ``wandb`` (offline unless configured)
and ``mlflow`` (a local store under ``<default_local_dir>/mlruns`` unless ``MLFLOW_TRACKING_URI`` is set) when
installed. Optional backends are imported lazily
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


def _json_value(v):
    """A metric as JSON: numpy/tensor scalars as Python numbers, NaN/inf as null."""
    if hasattr(v, "item") and getattr(v, "ndim", None) == 0:
        v = v.item()
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v


class FileLogger:
    """JSON lines, one per log call, flushed at once so a killed run keeps everything it logged."""

    def __init__(self, path: str):
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        self.path = path
        self._f = open(path, "a")

    def log(self, metrics: Mapping[str, float], step: int) -> None:
        clean = {k: _json_value(v) for k, v in metrics.items()}
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
    try:
        from omegaconf import OmegaConf

        return OmegaConf.to_container(config, resolve=True)
    except ValueError:
        return dict(config)


def _flatten_config(tree: Mapping, prefix: str = "") -> dict:
    out = {}
    for k, v in tree.items():
        if isinstance(v, Mapping):
            out.update(_flatten_config(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


class Tracking:
    """``Tracking(backends=["console", "file"], log_dir=...)``; ``log`` sends each metrics dict to every backend."""

    SUPPORTED = ("console", "file", "tensorboard", "wandb", "mlflow")

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
            elif name in ("wandb", "mlflow"):
                trainer = (config or {}).get("trainer", {}) if config is not None else {}
                project = trainer.get("project_name", "verl")
                experiment = trainer.get("experiment_name", os.path.basename(log_dir))
                cls = WandbLogger if name == "wandb" else MlflowLogger
                self.loggers.append(cls(log_dir, project, experiment, config))
            else:
                raise ValueError(f"unknown logger {name!r} in trainer.logger; supported: {self.SUPPORTED}")

    def log(self, data: Mapping[str, float], step: int) -> None:
        for logger in self.loggers:
            logger.log(data, step)

    def close(self) -> None:
        for logger in self.loggers:
            logger.close()
