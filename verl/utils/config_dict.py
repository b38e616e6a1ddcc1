"""The dict view of the PPO config (``get_ppo_default_config()`` and ``DataParallelRLTrainer``, docs/python_api.md):
the ``ppo_trainer`` tree as nested dicts plus the alias groups ``model``, ``train`` and ``reward``. An alias
table over the one schema: :func:`ppo_dict_to_overrides` turns a dict back into tree overrides.

The aliases, and the names of PPOTrainer's argument groups (``DataConfig.KEYS``, ...), are recorded once, as
``"api"`` metadata on the schema's fields; :func:`api_table` reads them back (docs/config_reference.md shows them).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Iterable, Mapping
from typing import Any

from verl.utils.config_loader import (
    ConfigError,
    UnknownConfigKeyError,
    _closest,
    _field_hints,
    _is_group,
    default_config,
    job_schema,
    load_config,
    schema_keys,
    to_container,
)

__all__ = [
    "ConfigDict",
    "api_table",
    "dict_key",
    "flatten_leaves",
    "get_ppo_default_config",
    "ppo_dict_to_overrides",
    "schema_api_names",
]


def _flatten(tree: Mapping, prefix: str = "") -> dict[str, Any]:
    out = {}
    for k, v in tree.items():
        path = f"{prefix}{k}"
        out[path] = v
        if isinstance(v, Mapping) and v:
            out.update(_flatten(v, path + "."))
    return out


class ConfigDict(dict):
    """A nested ``dict`` whose keys are fixed: setting or reading a key it lacks raises
    :class:`UnknownConfigKeyError` naming the closest valid key. Free-form groups (``{}`` in the defaults, e.g.
    ``reward_model.reward_kwargs``) take any key."""

    def __init__(self, data: Mapping[str, Any], path: str = "", schema_keys: Iterable[str] | None = None):
        super().__init__()
        self._path = path
        self._free_form = len(data) == 0
        self._all_keys: list[str] = list(schema_keys) if schema_keys is not None else []
        for k, v in data.items():
            child = f"{path}.{k}" if path else str(k)
            super().__setitem__(k, ConfigDict(v, child, self._all_keys) if isinstance(v, Mapping) else v)

    def _unknown(self, key: Any) -> UnknownConfigKeyError:
        path = f"{self._path}.{key}" if self._path else str(key)
        candidates = self._all_keys or [f"{self._path}.{k}" if self._path else k for k in self]
        return UnknownConfigKeyError(f"unknown config key {path!r}.{_closest(path, candidates)}")

    def __getitem__(self, key: Any) -> Any:
        if key not in self and not self._free_form:
            raise self._unknown(key)
        return super().__getitem__(key)

    def __setitem__(self, key: Any, value: Any) -> None:
        if key not in self and not self._free_form:
            raise self._unknown(key)
        current = super().get(key)
        if isinstance(current, ConfigDict) and isinstance(value, Mapping) and value is not current:
            for k, v in value.items():  # assigning a mapping to a group checks each of its keys
                current[k] = v
            return
        super().__setitem__(key, value)

    def update(self, other: Mapping[str, Any] = (), **kw: Any) -> None:  # type: ignore[override]
        for k, v in dict(other, **kw).items():
            self[k] = v

    def setdefault(self, key: Any, default: Any = None) -> Any:
        if key not in self:
            self[key] = default
        return self[key]

    def to_dict(self) -> dict[str, Any]:
        """A plain nested ``dict`` copy."""
        return {k: v.to_dict() if isinstance(v, ConfigDict) else v for k, v in self.items()}

    def __reduce__(self):
        return (_rebuild_config_dict, (self.to_dict(), self._path, self._all_keys))

    def __deepcopy__(self, memo: dict) -> ConfigDict:
        import copy

        return _rebuild_config_dict(copy.deepcopy(self.to_dict(), memo), self._path, self._all_keys)


def _rebuild_config_dict(data: dict, path: str, keys: list[str]) -> ConfigDict:
    return ConfigDict(data, path, keys)


DEFAULT_DICT_MODEL = "builtin://tiny-qwen2-arith-sft"

# ---------------------------------------------------------------------------------------- the API names of tree keys
# The Python API names of a tree key are recorded once, on its schema field: ``metadata={"api": (name, ...)}``, each
# name ``<group>.<key>``: one of PPOTrainer's argument groups (``DataConfig.rollout_batch_size``, verl.trainer.api)
# or an alias group of this dict view (``train.batch_size``). A section class placed at several paths of the tree
# (the optimizer, ``RolloutConfig``) names its keys' API names on the field that places it instead:
# ``metadata={"api": {"lr": ("OptimConfig.actor_lr",)}}``. A name on several keys sets them all.
API_METADATA = "api"
API_GROUPS = ("DataConfig", "EngineConfig", "OptimConfig")  # PPOTrainer's argument groups
DICT_ALIAS_GROUPS = ("model", "train")  # the dict view's alias groups


@functools.cache
def schema_api_names(root: type) -> dict[str, tuple[str, ...]]:
    """``{tree key: its API names}`` of a schema tree, from its fields' ``"api"`` metadata, in key order."""
    found: dict[str, tuple[str, ...]] = {}

    def walk(cls: type, prefix: str) -> None:
        hints = _field_hints(cls)
        for f in dataclasses.fields(cls):
            names = f.metadata.get(API_METADATA, ())
            for key, key_names in names.items() if isinstance(names, Mapping) else [("", names)] if names else []:
                path = prefix + f.name + (f".{key}" if key else "")
                found[path] = found.get(path, ()) + tuple(key_names)
            if _is_group(hints[f.name]):
                walk(hints[f.name], f"{prefix}{f.name}.")

    walk(root, "")
    order = {key: i for i, key in enumerate(schema_keys(root))}
    unknown = [f"{key} ({', '.join(names)})" for key, names in found.items() if key not in order]
    bad = [n for names in found.values() for n in names if n.split(".")[0] not in API_GROUPS + DICT_ALIAS_GROUPS]
    if unknown or bad:
        raise ConfigError(f"{root.__name__}: API names on keys it lacks {unknown}, or in no API group {bad}")
    return dict(sorted(found.items(), key=lambda item: order[item[0]]))


def api_table(group: str, root: type | None = None) -> dict[str, str]:
    """``{name: tree key}`` of one API group (``"DataConfig"``, ``"train"``, ...) of the ``ppo_trainer`` schema (or
    ``root``); a name on several keys maps to them all, joined by ``" + "`` in key order."""
    table: dict[str, str] = {}
    for key, names in schema_api_names(root or job_schema("ppo_trainer")).items():
        for name in names:
            name_group, _, leaf = name.partition(".")
            if name_group == group:
                table[leaf] = f"{table[leaf]} + {key}" if leaf in table else key
    return table


@functools.cache
def _dict_aliases() -> dict[str, str]:
    aliases = {f"{group}.{leaf}": key for group in DICT_ALIAS_GROUPS for leaf, key in api_table(group).items()}
    several = {alias: key for alias, key in aliases.items() if " + " in key}
    if several:
        raise ConfigError(f"a dict alias spells one tree key, these name several: {several}")
    return aliases


# Alias keys that are no spelling of one tree key, so no schema field carries them: each sets derived values in
# several keys (grad_accumulation_steps, use_amp), is only checked (dp/tp/pp_size: 1 is all there is), or takes a
# reward the tree cannot hold (a Python function). ppo_dict_to_overrides handles each (docs/python_api.md's table).
PPO_DICT_SPECIAL: dict[str, str] = {
    "train.dp_size": "trainer.n_gpus_per_node (1 only: the local backend runs one data-parallel rank)",
    "train.tp_size": "none: no tensor parallelism yet (1 only)",
    "train.pp_size": "none: no pipeline parallelism yet (1 only)",
    "train.grad_accumulation_steps": "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu and "
    "critic.ppo_micro_batch_size_per_gpu = ppo_mini_batch_size * rollout.n / steps",
    "train.use_amp": "actor_rollout_ref.model.dtype and critic.model.dtype = bf16",
    "reward.model": "the reward: 'auto', 'rule', a data source name, 'length', a Python function, or a local "
    "reward-model directory (reward_model.enable, reward_model.model.path)",
}

# The dict view's defaults are a run's without a task of its own (load_config("ppo_trainer"): the schema's, under the
# quickstart recipe), except these keys, which keep the schema's default where the recipe sets another: this is the
# PPO config, so PPO with a critic (the schema's gae, where quickstart picks grpo). No default is written twice.
PPO_DICT_SCHEMA_DEFAULT_KEYS = ("algorithm.adv_estimator",)


@functools.cache
def _tree_defaults() -> dict[str, Any]:
    return {key: _get_path(default_config("ppo_trainer"), key) for key in PPO_DICT_SCHEMA_DEFAULT_KEYS}


def __getattr__(name: str) -> Any:
    """The tables made from the schema, made on first use: the schema's modules import this one.

    ``PPO_DICT_ALIASES``: the alias keys (docs/python_api.md) that are another spelling of one tree key, from the
    schema's ``"api"`` metadata; change either, changing both differently is an error. ``PPO_DICT_TREE_DEFAULTS``:
    ``{key: the schema's default}`` for :data:`PPO_DICT_SCHEMA_DEFAULT_KEYS`."""
    if name == "PPO_DICT_ALIASES":
        return _dict_aliases()
    if name == "PPO_DICT_TREE_DEFAULTS":
        return _tree_defaults()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _get_path(tree: Mapping, key: str) -> Any:
    node: Any = tree
    for part in key.split("."):
        node = node[part]
    return node


def get_ppo_default_config() -> ConfigDict:
    """The PPO defaults as a nested dict: the alias groups ``model``, ``train`` and ``reward``,
    plus the whole ``ppo_trainer`` tree (``data``, ``actor_rollout_ref``, ``critic``, ``reward_model``,
    ``custom_reward_function``, ``algorithm``, ``trainer``) with its values resolved.

    Unknown keys raise with the closest valid key, on assignment and when a trainer reads the dict. An alias key
    and the tree key it spells (:data:`PPO_DICT_ALIASES`) both work; :func:`ppo_dict_to_overrides` turns the dict
    into the tree. The defaults are ``load_config("ppo_trainer")``'s (the schema's under the quickstart recipe), but
    for :data:`PPO_DICT_SCHEMA_DEFAULT_KEYS`: ``algorithm.adv_estimator`` is the schema's ``gae`` (quickstart: ``grpo``).
    """
    tree = to_container(load_config("ppo_trainer", overrides=_tree_defaults()))
    view: dict[str, Any] = {
        "model": {},  # filled from the aliases below
        "train": {
            "dp_size": 1,
            "tp_size": 1,
            "pp_size": 1,
            "grad_accumulation_steps": 1,
            "use_amp": False,
        },
        "reward": {"model": "auto"},
    }
    for alias, key in _dict_aliases().items():
        group, leaf = alias.split(".")
        view[group][leaf] = _get_path(tree, key)
    view["reward"].update(tree.pop("reward", {}))  # the tree's reward section (newer verl's keys) beside reward.model
    view.update(tree)
    return ConfigDict(view, schema_keys=list(_flatten(view)))


def dict_key(dotted: str) -> str:
    """``train.lr`` -> ``config['train']['lr']``, how the docs write it."""
    return "config" + "".join(f"[{p!r}]" for p in dotted.split("."))


def _check_known(config: Mapping, schema: Mapping, path: str = "", all_keys: list[str] | None = None) -> None:
    all_keys = all_keys if all_keys is not None else list(_flatten(schema))
    for k, v in config.items():
        p = f"{path}.{k}" if path else str(k)
        if isinstance(schema, Mapping) and len(schema) == 0:
            continue  # free-form group
        if k not in schema:
            raise UnknownConfigKeyError(f"unknown config key {p!r}.{_closest(p, all_keys)}")
        if isinstance(v, Mapping) and isinstance(schema[k], Mapping):
            _check_known(v, schema[k], p, all_keys)


def ppo_dict_to_overrides(config: Mapping[str, Any]) -> tuple[dict[str, Any], Any]:
    """Translate a :func:`get_ppo_default_config` dict into ``(overrides, reward)``: dotted tree keys for
    ``load_config("ppo_trainer", overrides=...)`` (only what differs from the defaults, so interpolations such as
    ``critic.model.path`` follow the actor), and the ``reward.model`` value.

    Raises :class:`UnknownConfigKeyError` for an unknown key (closest valid key named), :class:`ConfigError` when an
    alias key and its tree key were both changed to different values or a value cannot be translated, and
    ``NotImplementedError`` for ``tp_size``/``pp_size``/``dp_size`` > 1.
    """
    view_defaults = get_ppo_default_config().to_dict()
    yaml_defaults = to_container(load_config("ppo_trainer"))
    _check_known(config, view_defaults)
    cfg = _deep_merge(view_defaults, config)
    flat_cfg, flat_view, flat_yaml = (
        flatten_leaves(cfg),
        flatten_leaves(view_defaults),
        flatten_leaves(yaml_defaults),
    )
    overrides = {k: v for k, v in flat_cfg.items() if k in flat_yaml and v != flat_yaml[k]}

    def changed(key: str) -> bool:
        return flat_cfg[key] != flat_view[key]

    for alias, key in _dict_aliases().items():
        if not changed(alias):
            continue
        if changed(key) and flat_cfg[key] != flat_cfg[alias]:
            raise ConfigError(
                f"{dict_key(alias)}={flat_cfg[alias]!r} and {key}={flat_cfg[key]!r} set the same "
                "thing to different values: set one of them"
            )
        overrides[key] = flat_cfg[alias]
    for key in ("train.tp_size", "train.pp_size"):
        if flat_cfg[key] != 1:
            raise NotImplementedError(
                f"config['train']['{key.split('.')[1]}']={flat_cfg[key]}: this version has no "
                f"{'tensor' if 'tp' in key else 'pipeline'} parallelism; use 1"
            )
    if flat_cfg["train.dp_size"] != 1:
        raise NotImplementedError(
            f"config['train']['dp_size']={flat_cfg['train.dp_size']} (trainer.n_gpus_per_node): the local backend runs "
            "one data-parallel rank. Use 1, or run N data-parallel workers with the Ray backend: overrides "
            "trainer.backend=ray, trainer.n_gpus_per_node=N (batch sizes are global: the math is the same)"
        )
    if flat_cfg["train.use_amp"]:
        overrides["actor_rollout_ref.model.dtype"] = "bf16"
        overrides["critic.model.dtype"] = "bf16"
    steps = flat_cfg["train.grad_accumulation_steps"]
    if not isinstance(steps, int) or steps < 1:
        raise ConfigError(f"config['train']['grad_accumulation_steps']={steps!r} must be an integer >= 1")
    if steps != 1:
        mini = overrides.get(
            "actor_rollout_ref.actor.ppo_mini_batch_size", flat_yaml["actor_rollout_ref.actor.ppo_mini_batch_size"]
        )
        n = overrides.get("actor_rollout_ref.rollout.n", flat_yaml["actor_rollout_ref.rollout.n"])
        if (mini * n) % steps:
            raise ConfigError(
                f"config['train']['grad_accumulation_steps']={steps} must divide the mini-batch of "
                f"mini_batch_size * responses_per_prompt = {mini} * {n} = {mini * n} responses"
            )
        overrides["actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu"] = mini * n // steps
        overrides["critic.ppo_micro_batch_size_per_gpu"] = mini * n // steps
    return overrides, flat_cfg["reward.model"]


def _deep_merge(base: Mapping, update: Mapping) -> dict:
    out = {k: (dict(v) if isinstance(v, Mapping) else v) for k, v in base.items()}
    for k, v in update.items():
        if isinstance(v, Mapping) and isinstance(out.get(k), Mapping) and out.get(k):
            out[k] = _deep_merge(out[k], v)
        else:
            out[k] = v.to_dict() if isinstance(v, ConfigDict) else v
    return out


def flatten_leaves(tree: Mapping, prefix: str = "") -> dict[str, Any]:
    """Dotted paths of the leaves (values that are not non-empty mappings)."""
    out: dict[str, Any] = {}
    for k, v in tree.items():
        path = f"{prefix}{k}"
        if isinstance(v, Mapping) and v:
            out.update(flatten_leaves(v, path + "."))
        else:
            out[path] = v.to_dict() if isinstance(v, ConfigDict) else v
    return out
