"""Datasets: built-in verifiable tasks and ``builtin://`` dataset specs (see :mod:`verl.data.tasks`), and the JSONL
prompt loader of the Python API (``make_pretokenized_dataloader``, ``DataLoader``; :mod:`verl.data.loader`)."""

import importlib

from verl.data.tasks import TASKS, make_task_dataset, resolve_data_files

__all__ = ["TASKS", "DataLoader", "make_pretokenized_dataloader", "make_task_dataset", "resolve_data_files"]


def __getattr__(name: str):
    if name in ("DataLoader", "make_pretokenized_dataloader"):
        return getattr(importlib.import_module("verl.data.loader"), name)
    raise AttributeError(f"module 'verl.data' has no attribute {name!r}")
