"""Datasets: built-in verifiable tasks and ``builtin://`` dataset specs (see :mod:`verl.data.tasks`)."""

from verl.data.tasks import TASKS, make_task_dataset, resolve_data_files

__all__ = ["TASKS", "make_task_dataset", "resolve_data_files"]
