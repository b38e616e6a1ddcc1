"""Every logger backend writes something a user can read back (real wandb offline files, a real MLflow store)."""

import json
import os

import pytest

from verl.utils.tracking import Tracking

CONFIG = {"trainer": {"project_name": "proj", "experiment_name": "exp"}, "actor": {"lr": 1e-3}}


def test_console_and_file(tmp_path):
    lines = []
    t = Tracking(["console", "file"], str(tmp_path), console_keys=["a"], write=lines.append)
    t.log({"a": 1.5, "b": float("nan")}, step=3)
    t.close()
    assert lines == ["step 3: a=1.5000"]
    rec = json.loads((tmp_path / "metrics.jsonl").read_text())
    assert rec["step"] == 3 and rec["a"] == 1.5 and rec["b"] is None  # NaN becomes null: valid JSON


def test_tensorboard(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    t = Tracking(["tensorboard"], str(tmp_path))
    t.log({"actor/pg_loss": 0.25}, step=1)
    t.close()
    acc = EventAccumulator(str(tmp_path / "tensorboard"))
    acc.Reload()
    assert [e.value for e in acc.Scalars("actor/pg_loss")] == [0.25]


@pytest.mark.slow
def test_wandb_offline(tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    t = Tracking(["wandb"], str(tmp_path), config=CONFIG)
    t.log({"val-core/acc": 0.5}, step=1)
    t.close()
    runs = [d for d in os.listdir(tmp_path / "wandb") if d.startswith("offline-run-")]
    assert runs and any(f.endswith(".wandb") for f in os.listdir(tmp_path / "wandb" / runs[0]))


@pytest.mark.slow
def test_mlflow_local_store(tmp_path, monkeypatch):
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    from mlflow.tracking import MlflowClient

    t = Tracking(["mlflow"], str(tmp_path), config=CONFIG)
    run_id = t.loggers[0].run.info.run_id
    t.log({"val-core/arithmetic/reward/mean@1": 0.75, "actor/lr": 1e-3}, step=2)
    t.close()
    client = MlflowClient("file:" + str(tmp_path / "mlruns"))
    hist = client.get_metric_history(run_id, "val-core/arithmetic/reward/mean_at_1")
    assert [(m.step, m.value) for m in hist] == [(2, 0.75)]
    assert client.get_run(run_id).data.params["actor.lr"] == "0.001"


def test_file_logger_writes_numpy_and_tensor_scalars(tmp_path):
    import numpy as np
    import torch

    from verl.utils.tracking import FileLogger

    logger = FileLogger(str(tmp_path / "m.jsonl"))
    logger.log({"a": np.float32(1.5), "b": torch.tensor(float("nan")), "c": np.int64(3)}, step=1)
    logger.close()
    row = json.loads((tmp_path / "m.jsonl").read_text())
    assert (row["a"], row["b"], row["c"]) == (1.5, None, 3)


def test_verl_signature_writes_where_verl_does(tmp_path, monkeypatch):
    """``Tracking(project_name, experiment_name, default_backend)`` without a log_dir: verl's file location."""
    monkeypatch.setenv("VERL_FILE_LOGGER_ROOT", str(tmp_path))
    monkeypatch.delenv("VERL_FILE_LOGGER_PATH", raising=False)
    lines = []
    t = Tracking(project_name="proj", experiment_name="exp", default_backend=["console", "file"], write=lines.append)
    assert t.project_name == "proj" and sorted(t.logger) == ["console", "file"]
    t.log(data={"a": 1.0}, step=1, backend=["file"])  # only the file backend
    t.log(data={"a": 2.0}, step=2)
    t.finish()
    t.finish()  # idempotent
    rows = [json.loads(line) for line in (tmp_path / "proj" / "exp.jsonl").read_text().splitlines()]
    assert [r["a"] for r in rows] == [1.0, 2.0] and lines == ["step 2: a=2.0000"]


def test_the_run_is_named_by_the_caller_and_the_config_only_recorded():
    """As verl's: the trainer passes trainer.project_name / experiment_name; the config is what backends record."""
    t = Tracking("proj", "exp", default_backend=[], config=CONFIG)
    assert (t.project_name, t.experiment_name) == ("proj", "exp")
    assert (Tracking(default_backend=[], config=CONFIG).project_name, Tracking(default_backend=[]).experiment_name) == (
        "verl",
        "run",
    )


def test_validation_generations_to_tensorboard(tmp_path, monkeypatch):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from verl.utils.tracking import ValidationGenerationsLogger

    monkeypatch.setenv("TENSORBOARD_DIR", str(tmp_path))
    logger = ValidationGenerationsLogger(project_name="p", experiment_name="e")
    logger.log(["console", "tensorboard"], [("1+1=", "2", 1.0), ("2+2=", "5", 0.0)], step=3)
    logger._writer.close()
    acc = EventAccumulator(str(tmp_path), size_guidance={"tensors": 0})
    acc.Reload()
    text = acc.Tensors("val/generations/text_summary")[0].tensor_proto.string_val[0].decode()
    assert "1+1=" in text and "**score:** 0.0" in text
