"""Built-in verifiable tasks that write verl-format parquet.

Each row looks exactly like the rows of public verl's preprocessing scripts::

    {"data_source": "arithmetic", "prompt": [{"role": "user", "content": "What is 37 + 48?"}],
     "ability": "math", "reward_model": {"style": "rule", "ground_truth": "85"},
     "extra_info": {"split": "train", "index": 0, "question": "What is 37 + 48?",
                    "answer": "37 + 48 = 85\\n#### 85"}}

``extra_info.answer`` is a full reference response (the SFT target text).

Train and test are disjoint *by problem*: every distinct problem (its canonical key, e.g.
``37+48``) goes to the test side when a seeded hash of the key falls below ``test_fraction``,
otherwise to the train side, so the two splits never share a problem whatever sizes are asked
for. Rows within a split are distinct problems too. The same (task, split, size, seed, options)
always gives identical rows.

Datasets can also be named by a spec string that :func:`resolve_data_files` turns into a cached
parquet path, e.g. ``builtin://arithmetic/train`` or
``builtin://countdown/test?size=200&seed=1&max_number=30``.

``calc_multiply`` is the multi-turn tool task: its rows carry more columns (``agent_name``, ``messages``, ``tools``,
``extra_info.tools_kwargs``; :mod:`verl.data.tasks.calc_multiply`).
"""

from __future__ import annotations

import hashlib
import json
import os
import uuid
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from verl.data.tasks import arithmetic, calc_multiply, code_functions, countdown
from verl.data.tasks.base import (
    DEFAULT_SEED,
    DEFAULT_TEST_FRACTION,
    DEFAULT_TEST_SIZE,
    DEFAULT_TRAIN_SIZE,
    SPLITS,
    TaskParam,
    TaskSpec,
    generate_rows,
)

# Bump when generation changes so cached builtin:// datasets are regenerated.
GENERATOR_VERSION = 1
BUILTIN_SCHEME = "builtin://"

TASKS: dict[str, TaskSpec] = {
    spec.name: spec for spec in (arithmetic.TASK, countdown.TASK, calc_multiply.TASK, code_functions.TASK)
}

__all__ = [
    "DEFAULT_SEED",
    "DEFAULT_TEST_FRACTION",
    "DEFAULT_TEST_SIZE",
    "DEFAULT_TRAIN_SIZE",
    "TASKS",
    "TaskParam",
    "TaskSpec",
    "generate_task_rows",
    "get_task",
    "make_task_dataset",
    "problem_key",
    "resolve_data_files",
    "write_rows_to_parquet",
]


def get_task(task: str) -> TaskSpec:
    """Look up a built-in task by name; unknown names raise a ValueError listing the known ones."""
    try:
        return TASKS[task]
    except (KeyError, TypeError):
        raise ValueError(f"unknown task {task!r}; known tasks: {sorted(TASKS)}") from None


def generate_task_rows(
    task: str,
    split: str,
    size: int,
    seed: int = DEFAULT_SEED,
    test_fraction: float = DEFAULT_TEST_FRACTION,
    **task_kwargs: Any,
) -> list[dict[str, Any]]:
    """Generate ``size`` verl-format rows of ``task`` for ``split`` ("train" or "test").

    ``task_kwargs`` are the task's options (see ``TASKS[task].params``). Raises ValueError for an
    unknown task/option, or when the problem space has fewer than ``size`` problems in the split.
    """
    return generate_rows(get_task(task), split, size, seed, test_fraction=test_fraction, **task_kwargs)


def problem_key(task: str, row: Mapping[str, Any]) -> str:
    """Canonical problem key of a generated row (what the train/test split and dedup use)."""
    gt = row["reward_model"]["ground_truth"]
    if task == "countdown":
        return ",".join(str(v) for v in sorted(gt["numbers"])) + f"={gt['target']}"
    if task in ("arithmetic", "calc_multiply"):
        question = row["extra_info"]["question"]
        return question.removeprefix("What is ").removesuffix("?").replace(" ", "")
    if task == "code_functions":
        return row["extra_info"]["question"]  # one question per problem
    raise ValueError(f"unknown task {task!r}; known tasks: {sorted(TASKS)}")


def write_rows_to_parquet(rows: list[dict[str, Any]], path: str | os.PathLike) -> str:
    """Write rows to a parquet file atomically (temp file in the same folder, then ``os.replace``).

    Parent folders are created. Returns the path as a string. No rows is an error naming the file.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = Path(path)
    rows = list(rows)
    if not rows:  # pyarrow would write a file without columns, which fails far from here ("no column 'prompt'")
        raise ValueError(f"{path}: no rows to write (an empty split or input file); nothing was written")
    path.parent.mkdir(parents=True, exist_ok=True)
    table = pa.Table.from_pylist(rows)
    # A unique name in the same folder (so os.replace is atomic); open() keeps the umask's permissions.
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        with open(tmp, "xb") as f:
            pq.write_table(table, f)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return str(path)


def make_task_dataset(
    task: str,
    out_dir: str | os.PathLike,
    train_size: int = DEFAULT_TRAIN_SIZE,
    test_size: int = DEFAULT_TEST_SIZE,
    seed: int = DEFAULT_SEED,
    test_fraction: float = DEFAULT_TEST_FRACTION,
    **task_kwargs: Any,
) -> dict[str, str]:
    """Write ``out_dir/train.parquet`` and ``out_dir/test.parquet``; return ``{"train": path, "test": path}``.

    Both splits are generated before anything is written, so a too-small problem space leaves no
    partial output.
    """
    sizes = {"train": train_size, "test": test_size}
    rows = {
        split: generate_task_rows(task, split, size, seed, test_fraction=test_fraction, **task_kwargs)
        for split, size in sizes.items()
    }
    return {split: write_rows_to_parquet(rows[split], Path(out_dir) / f"{split}.parquet") for split in SPLITS}


# ---- builtin:// dataset specs ---------------------------------------------------------------


def get_cache_dir() -> Path:
    """``$VERL_CACHE_DIR`` or ``~/.cache/verl``."""
    return Path(os.environ.get("VERL_CACHE_DIR") or os.path.expanduser("~/.cache/verl"))


def _parse_value(text: str, param: TaskParam | None, name: str, kind: type) -> Any:
    try:
        return param.parse(text) if param is not None else kind(text)
    except ValueError as exc:
        raise ValueError(f"bad value {text!r} for {name!r}: {exc}") from None


def parse_builtin_spec(spec: str) -> tuple[str, str, dict[str, Any]]:
    """Split ``builtin://<task>/<split>?k=v&...`` into ``(task, split, make_task_dataset kwargs)``.

    ``size`` is the requested split's size; ``train_size``/``test_size``/``seed``/``test_fraction``
    and the task's own options may be given too. Values are percent-decoded, but ``+`` stays ``+``.
    """
    usage = f"expected {BUILTIN_SCHEME}<task>/<split>[?key=value&...] with task in {sorted(TASKS)}"
    if not spec.startswith(BUILTIN_SCHEME):
        raise ValueError(f"not a builtin dataset spec: {spec!r}; {usage}")
    body, _, query = spec[len(BUILTIN_SCHEME) :].partition("?")
    parts = [p for p in body.split("/") if p]
    if len(parts) != 2:
        raise ValueError(f"bad builtin dataset spec {spec!r}; {usage}")
    task_name, split = parts
    task = get_task(task_name)
    if split not in SPLITS:
        raise ValueError(f"bad split {split!r} in {spec!r}; split must be one of {SPLITS}")

    common = {"train_size": int, "test_size": int, "seed": int, "test_fraction": float}
    params = {p.name: p for p in task.params}
    kwargs: dict[str, Any] = {}
    for item in filter(None, query.split("&")):
        name, eq, raw = item.partition("=")
        name, raw = unquote(name), unquote(raw)
        given = name
        if not eq:
            raise ValueError(f"query item {item!r} in {spec!r} has no '='")
        if name == "size":
            name = f"{split}_size"
            if name in kwargs:
                raise ValueError(f"both size and {name} given in {spec!r}")
        elif name in kwargs:
            raise ValueError(f"{name!r} given twice in {spec!r}")
        if name not in common and name not in params:
            allowed = sorted({"size", *common, *params})
            raise ValueError(f"unknown option {name!r} in {spec!r}; allowed: {allowed}")
        kwargs[name] = _parse_value(raw, params.get(name), given, common.get(name, str))
    return task.name, split, kwargs


def _is_builtin(spec: Any) -> bool:
    return isinstance(spec, str) and spec.startswith(BUILTIN_SCHEME)


def resolve_data_files(spec: Any) -> Any:
    """Turn ``builtin://<task>/<split>?...`` into a parquet path, generating it into the cache if missing.

    The cache folder is ``$VERL_CACHE_DIR`` (default ``~/.cache/verl``) ``/datasets/<task>-<hash>/``
    holding ``train.parquet`` and ``test.parquet``; the hash covers every generation parameter, so
    both splits of one folder are disjoint. Defaults: train_size 4000, test_size 200, seed 0.
    Any other string (or path) is returned unchanged; a list/tuple is resolved element-wise.
    """
    if isinstance(spec, (list, tuple)) or (not isinstance(spec, (str, os.PathLike)) and isinstance(spec, Iterable)):
        return [resolve_data_files(item) for item in spec]
    if not _is_builtin(spec):
        return spec
    task_name, split, kwargs = parse_builtin_spec(spec)
    task = get_task(task_name)
    settings = {
        "train_size": kwargs.pop("train_size", DEFAULT_TRAIN_SIZE),
        "test_size": kwargs.pop("test_size", DEFAULT_TEST_SIZE),
        "seed": kwargs.pop("seed", DEFAULT_SEED),
        "test_fraction": kwargs.pop("test_fraction", DEFAULT_TEST_FRACTION),
    }
    params = task.normalize_params(kwargs)
    identity = {"task": task.name, "version": GENERATOR_VERSION, **settings, "params": params}
    digest = hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:12]
    out_dir = get_cache_dir() / "datasets" / f"{task.name}-{digest}"
    target = out_dir / f"{split}.parquet"
    if not target.is_file():
        make_task_dataset(task.name, out_dir, **settings, **params)
        tmp = out_dir / f".params.json.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp"
        tmp.write_text(json.dumps(identity, sort_keys=True, indent=1) + "\n")
        os.replace(tmp, out_dir / "params.json")
    return str(target)


def run_converter(convert, argv: list[str] | None, description: str, default_local_dir: str, input_help: str) -> int:
    """The command line of a dataset converter script (``examples/data_preprocess/*.py``): ``--input_dir`` and
    ``--local_dir``, then ``convert(input_dir, local_dir) -> {split: (path, rows)}``; a bad input prints one
    ``error:`` line and returns 1."""
    import argparse
    import sys

    parser = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--input_dir", required=True, help=input_help)
    parser.add_argument("--local_dir", default=default_local_dir, help="output folder (%(default)s)")
    args = parser.parse_args(argv)
    try:
        written = convert(os.path.expanduser(args.input_dir), os.path.expanduser(args.local_dir))
    except (ValueError, FileNotFoundError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    for split, (path, count) in written.items():
        print(f"{split}: {path} ({count} rows)")
    return 0
