"""One typed YAML tree per job, with verl's command-line overrides.

    python -m verl.trainer.main_sft optim.lr=3e-3 trainer.total_training_steps=100 --config my.yaml

Order of precedence: the job's default YAML (``verl/trainer/config/<name>.yaml``) < ``--config file.yaml`` (may be
given several times) < ``key=value`` overrides. The default tree is the schema: a key it lacks is an error naming the
closest valid key, and a value whose type differs from the default's is an error naming the key. ``+key=value`` adds a
key the schema does not have (as in Hydra), for free-form groups. A default of ``null`` accepts any type, and any key
may be set to ``null``. A list key given one scalar takes it as a one-item list. An empty mapping (``{}``) in the defaults is free-form: any keys are accepted under it.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Iterable, Mapping
from typing import Any

import yaml
from omegaconf import DictConfig, OmegaConf

CONFIG_DIR = os.path.join(os.path.dirname(os.path.dirname(__file__)), "trainer", "config")


class ConfigError(ValueError):
    """A bad key or value in a job's configuration; the message names the key path and the fix."""


def default_config_path(name: str) -> str:
    return os.path.join(CONFIG_DIR, f"{name}.yaml")


def load_yaml(path: str) -> dict:
    try:
        with open(path) as f:
            data = yaml.safe_load(f)
    except FileNotFoundError:
        raise ConfigError(f"config file {path!r} does not exist") from None
    except yaml.YAMLError as e:
        raise ConfigError(f"config file {path!r} is not valid YAML: {e}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"config file {path!r} must hold a mapping at the top level, got {type(data).__name__}")
    return data


def parse_overrides(args: Iterable[str]) -> tuple[list[str], list[tuple[str, Any, bool]]]:
    """Split argv into ``--config`` files and ``(key, value, is_new)`` overrides; values are parsed as YAML."""
    files: list[str] = []
    overrides: list[tuple[str, Any, bool]] = []
    args = list(args)
    i = 0
    while i < len(args):
        arg = args[i]
        if arg in ("--config", "--config-file", "-c"):
            if i + 1 >= len(args):
                raise ConfigError(f"{arg} needs a YAML file path after it")
            files.append(args[i + 1])
            i += 2
            continue
        if arg.startswith("--config="):
            files.append(arg.split("=", 1)[1])
        elif "=" in arg and not arg.startswith("-"):
            key, raw = arg.split("=", 1)
            is_new = key.startswith("+")
            key = key.lstrip("+")
            if not key:
                raise ConfigError(f"override {arg!r} has no key: write key.path=value")
            overrides.append((key, _parse_value(raw), is_new))
        else:
            raise ConfigError(
                f"cannot read the argument {arg!r}: write overrides as key.path=value (e.g. trainer.seed=1) "
                "or pass a YAML file with --config FILE"
            )
        i += 1
    return files, overrides


def _parse_value(raw: str) -> Any:
    try:
        return yaml.safe_load(raw) if raw != "" else ""
    except yaml.YAMLError:
        return raw


def _flatten(tree: Mapping, prefix: str = "") -> dict[str, Any]:
    out = {}
    for k, v in tree.items():
        path = f"{prefix}{k}"
        out[path] = v
        if isinstance(v, Mapping) and v:
            out.update(_flatten(v, path + "."))
    return out


def _closest(key: str, candidates: Iterable[str]) -> str:
    candidates = list(candidates)
    leaf = key.rsplit(".", 1)[-1]
    # The right leaf under the wrong group (trainer.lr -> optim.lr) beats a spelling neighbour.
    match = [c for c in candidates if c.rsplit(".", 1)[-1] == leaf]
    match = match or difflib.get_close_matches(key, candidates, n=1, cutoff=0.6)
    match = match or difflib.get_close_matches(key, candidates, n=1, cutoff=0.3)
    return f" Did you mean {match[0]!r}?" if match else ""


def _coerce_number(default: Any, value: Any) -> Any:
    # A list key takes one scalar as a one-item list (data.train_files=x.parquet, trainer.logger=console).
    if isinstance(default, (list, tuple)) and isinstance(value, (str, int, float)) and not isinstance(value, bool):
        return [value]
    # YAML 1.1 reads "1e-3" (no dot) as a string; a float key should still take it.
    if isinstance(value, str) and isinstance(default, float):
        try:
            return float(value)
        except ValueError:
            return value
    return value


def _type_ok(default: Any, value: Any) -> bool:
    if value is None or default is None:
        return True
    if isinstance(default, bool):
        return isinstance(value, bool)
    if isinstance(default, float):
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if isinstance(default, int):
        return isinstance(value, int) and not isinstance(value, bool)
    if isinstance(default, str):
        return isinstance(value, str)
    if isinstance(default, (list, tuple)):
        return isinstance(value, (list, tuple))
    if isinstance(default, Mapping):
        return isinstance(value, Mapping)
    return True


def _set(tree: dict, schema: Mapping, key: str, value: Any, source: str, allow_new: bool) -> None:
    """Set dotted ``key`` in ``tree`` (both from the root), checking it against the ``schema`` tree."""
    parts = key.split(".")
    node: dict = tree
    snode: Any = schema
    for depth, part in enumerate(parts):
        path = ".".join(parts[: depth + 1])
        free_form = isinstance(snode, Mapping) and len(snode) == 0
        checked = snode is not None and not free_form and not allow_new
        if checked and not isinstance(snode, Mapping):
            parent = ".".join(parts[:depth])
            raise ConfigError(f"{source}: {parent!r} is a value, not a group, so {key!r} cannot be set.")
        if checked and part not in snode:
            raise ConfigError(f"{source}: unknown config key {path!r}.{_closest(path, _flatten(schema))}")
        child_schema = snode.get(part) if isinstance(snode, Mapping) and not free_form else None
        if depth < len(parts) - 1:
            if not isinstance(node.get(part), dict):
                node[part] = {}
            node, snode = node[part], child_schema
            continue
        if isinstance(value, Mapping) and isinstance(child_schema, Mapping) and child_schema:
            if not isinstance(node.get(part), dict):
                node[part] = {}
            for k, v in value.items():  # a nested mapping from a YAML file: check each leaf by its full path
                _set(tree, schema, f"{path}.{k}", v, source, allow_new)
            return
        value = _coerce_number(child_schema, value)
        if child_schema is not None and not _type_ok(child_schema, value):
            raise ConfigError(
                f"{source}: config key {path!r} expects {_type_name(child_schema)} (default {child_schema!r}), "
                f"got {type(value).__name__} {value!r}"
            )
        node[part] = value


def _type_name(default: Any) -> str:
    if isinstance(default, bool):
        return "a boolean"
    if isinstance(default, float):
        return "a number"
    if isinstance(default, int):
        return "an integer"
    if isinstance(default, str):
        return "a string"
    if isinstance(default, (list, tuple)):
        return "a list"
    if isinstance(default, Mapping):
        return "a mapping"
    return type(default).__name__


def load_config(name: str, argv: Iterable[str] | None = None, overrides: Mapping[str, Any] | None = None) -> DictConfig:
    """Build a job's validated config: defaults < ``--config`` files < ``key=value`` args < ``overrides`` dict."""
    raw_defaults = load_yaml(default_config_path(name))
    tree = _deepcopy(raw_defaults)
    # The schema is the resolved defaults: a key defaulting to "${data.max_response_length}" is an int key.
    defaults = OmegaConf.to_container(OmegaConf.create(raw_defaults), resolve=True)
    files, arg_overrides = parse_overrides(argv or [])
    for path in files:
        for key, value in load_yaml(path).items():
            _set(tree, defaults, str(key), value, source=f"config file {path!r}", allow_new=False)
    for key, value, is_new in arg_overrides:
        _set(tree, defaults, key, value, source="command line", allow_new=is_new)
    for key, value in (overrides or {}).items():
        _set(tree, defaults, key, value, source="overrides", allow_new=False)
    cfg = OmegaConf.create(tree)
    OmegaConf.resolve(cfg)
    return cfg


def _deepcopy(tree: Any) -> Any:
    if isinstance(tree, Mapping):
        return {k: _deepcopy(v) for k, v in tree.items()}
    if isinstance(tree, list):
        return [_deepcopy(v) for v in tree]
    return tree


def to_yaml(cfg: DictConfig) -> str:
    return OmegaConf.to_yaml(cfg)
