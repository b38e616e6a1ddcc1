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


# YAML trees merged into a job's defaults: keys of public verl accepted so that ported scripts run
# (``ported_verl_keys.yaml``; what each does here, and the values that warn or fail: ``verl.utils.ported_keys``)
MERGED_DEFAULTS: dict[str, tuple[str, ...]] = {
    "ppo_trainer": ("ported_verl_keys",),
    "sft_trainer": ("ported_verl_sft_keys",),
}


def _merge_new_keys(base: dict, extra: Mapping, source: str, prefix: str = "") -> None:
    """Add ``extra``'s keys to ``base`` in place; a key both define as a leaf is a packaging error."""
    for key, value in extra.items():
        if key not in base:
            base[key] = value
        elif isinstance(base[key], dict) and isinstance(value, Mapping):
            _merge_new_keys(base[key], value, source, f"{prefix}{key}.")
        else:
            raise ConfigError(f"{source} redefines {prefix}{key}, which the job's own YAML already has")


def load_defaults(name: str) -> dict:
    """A job's default tree: ``<name>.yaml`` plus the trees `MERGED_DEFAULTS` adds to it."""
    tree = load_yaml(default_config_path(name))
    for extra in MERGED_DEFAULTS.get(name, ()):
        _merge_new_keys(tree, load_yaml(default_config_path(extra)), f"{extra}.yaml")
    return tree


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
    # A string key given a number (experiment_name=2024, which YAML reads as an int): the text that was typed.
    if isinstance(default, str) and isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    # YAML 1.1 reads "1e-3" (no dot) as a string; a float key should still take it.
    if isinstance(value, str) and isinstance(default, float):
        try:
            return float(value)
        except ValueError:
            return value
    return value


# Keys whose default is null (off / automatic) still have a type: an example value of it, by the key's last parts.
NULL_DEFAULT_TYPES: dict[str, Any] = {
    "data.tokenizer": "",
    "data.val_batch_size": 0,
    "data.seed": 0,
    "mixed_precision.param_dtype": "",
    "ref.enable": False,
    "critic.enable": False,
    "rollout.micro_batch_size": 0,
    # ported verl keys (ported_verl_keys.yaml)
    "ppo_micro_batch_size": 0,
    "log_prob_micro_batch_size": 0,
    "reward_model.micro_batch_size": 0,
    "custom_cls.path": "",
    "external_lib": "",
    "custom_cls.name": "",
    "prompt_dict_keys": [""],
    "response_dict_keys": [""],
    "data.chat_template": "",
    "max_ckpt_to_keep": 0,
    "max_model_len": 0,
    "reward_model.max_length": 0,
    "loss_scale_factor": 0.0,
    "trainer.default_hdfs_dir": "",
    "trainer.rollout_data_dir": "",
    "trainer.validation_data_dir": "",
    "ray_init.timeline_json_file": "",
    "reward_model.model.path": "",
    "model.input_tokenizer": "",
    "custom_reward_function.path": "",
    "trainer.resume_from_path": "",
    "trainer.max_actor_ckpt_to_keep": 0,
    "trainer.max_critic_ckpt_to_keep": 0,
    "ray_init.address": "",
    "ray_init.num_cpus": 0,
    "ray_init.num_threads_per_worker": 0,
    "trainer.total_training_steps": 0,
    "output.path": "",
    "data.path": "",
}


def _null_default_type(path: str) -> Any:
    for suffix, example in NULL_DEFAULT_TYPES.items():
        if path == suffix or path.endswith("." + suffix):
            return example
    return None


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
        if not isinstance(value, (list, tuple)):
            return False
        kinds = {type(d) for d in default}  # a uniform default list types its elements (betas: numbers)
        return len(kinds) != 1 or all(v is not None and _type_ok(default[0], v) for v in value)
    if isinstance(default, Mapping):
        return isinstance(value, Mapping)
    return True


def _set(tree: dict, schema: Mapping, key: str, value: Any, source: str, allow_new: bool, interpolated: list) -> None:
    """Set dotted ``key`` in ``tree`` (both from the root), checking it against the ``schema`` tree. A ``${...}``
    value is set as is and recorded in ``interpolated`` as ``(key, expected default, source)``: its resolved value
    is checked once the whole tree resolves."""
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
                _set(tree, schema, f"{path}.{k}", v, source, allow_new, interpolated)
            return
        if value is None and isinstance(child_schema, Mapping) and child_schema:
            if source.startswith("config file"):  # a group whose keys are all commented out: no change
                return
            raise ConfigError(f"{source}: {path!r} is a group of keys; null would delete it. Set its keys instead.")
        expected = child_schema if child_schema is not None else _null_default_type(path)
        if isinstance(value, str) and value.startswith("${") and value.endswith("}"):
            node[part] = value  # an interpolation, as the defaults use
            interpolated.append((path, expected, source))
            return
        value = _coerce_number(expected, value)
        if isinstance(expected, (list, tuple)) and isinstance(value, (list, tuple)) and expected:
            value = [_coerce_number(expected[0], v) for v in value]
        if expected is not None and not _type_ok(expected, value):
            what = f"default {child_schema!r}" if child_schema is not None else "default null: off/automatic"
            raise ConfigError(
                f"{source}: config key {path!r} expects {_type_name(expected)} ({what}), "
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
        kinds = {type(d) for d in default}
        plural = {bool: "booleans", float: "numbers", int: "integers", str: "strings"}
        return f"a list of {plural[type(default[0])]}" if len(kinds) == 1 and type(default[0]) in plural else "a list"
    if isinstance(default, Mapping):
        return "a mapping"
    return type(default).__name__


def load_config(name: str, argv: Iterable[str] | None = None, overrides: Mapping[str, Any] | None = None) -> DictConfig:
    """Build a job's validated config: defaults < ``--config`` files < ``key=value`` args < ``overrides`` dict."""
    interpolated: list[tuple[str, Any, str]] = []
    raw_defaults = load_defaults(name)
    tree = _deepcopy(raw_defaults)
    # The schema is the resolved defaults: a key defaulting to "${data.max_response_length}" is an int key.
    defaults = OmegaConf.to_container(OmegaConf.create(raw_defaults), resolve=True)
    files, arg_overrides = parse_overrides(argv or [])
    for path in files:
        for key, value in load_yaml(path).items():
            _set(
                tree,
                defaults,
                str(key),
                value,
                source=f"config file {path!r}",
                allow_new=False,
                interpolated=interpolated,
            )
    for key, value, is_new in arg_overrides:
        _set(tree, defaults, key, value, source="command line", allow_new=is_new, interpolated=interpolated)
    for key, value in (overrides or {}).items():
        _set(tree, defaults, key, value, source="overrides", allow_new=False, interpolated=interpolated)
    cfg = OmegaConf.create(tree)
    try:
        OmegaConf.resolve(cfg)
    except Exception as e:  # an override's ${...} naming a key that does not exist
        raise ConfigError(f"a ${{...}} interpolation does not resolve: {str(e).splitlines()[0]}") from None
    for path, expected, source in interpolated:
        value = OmegaConf.select(cfg, path)
        if expected is not None and not _type_ok(expected, value):
            raise ConfigError(
                f"{source}: config key {path!r} expects {_type_name(expected)}, but its interpolation resolves to "
                f"{type(value).__name__} {value!r}"
            )
    return cfg


def _deepcopy(tree: Any) -> Any:
    if isinstance(tree, Mapping):
        return {k: _deepcopy(v) for k, v in tree.items()}
    if isinstance(tree, list):
        return [_deepcopy(v) for v in tree]
    return tree


def to_yaml(cfg: DictConfig) -> str:
    return OmegaConf.to_yaml(cfg)


# ------------------------------------------------------------------------------------------------------------------
# The dict view of the PPO config (seed article 004: ``get_ppo_default_config()``, ``DataParallelRLTrainer``)
# ------------------------------------------------------------------------------------------------------------------


class UnknownConfigKeyError(ConfigError, KeyError):
    """An unknown key in a dict config; both a ``ValueError`` (like every :class:`ConfigError`) and a ``KeyError``."""

    def __str__(self) -> str:  # KeyError would print the message quoted
        return str(self.args[0]) if self.args else ""


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

# The article's keys that are another spelling of one tree key. Change either; changing both differently is an error.
PPO_DICT_ALIASES: dict[str, str] = {
    "model.pretrained_model_name_or_path": "actor_rollout_ref.model.path",
    "model.tokenizer_name_or_path": "data.tokenizer",
    "train.lr": "actor_rollout_ref.actor.optim.lr",
    "train.critic_lr": "critic.optim.lr",
    "train.batch_size": "data.train_batch_size",
    "train.mini_batch_size": "actor_rollout_ref.actor.ppo_mini_batch_size",
    "train.responses_per_prompt": "actor_rollout_ref.rollout.n",
    "train.ppo_epochs": "actor_rollout_ref.actor.ppo_epochs",
    "train.total_steps": "trainer.total_training_steps",
    "train.max_response_length": "data.max_response_length",
    "train.seed": "trainer.seed",
}

# The article's keys that set several tree keys or are checked (docs/python_api.md has the table).
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

# API defaults that differ from ppo_trainer.yaml: the article calls this the PPO config, so PPO with a critic (GAE).
PPO_DICT_TREE_DEFAULTS: dict[str, Any] = {"algorithm.adv_estimator": "gae"}


def _get_path(tree: Mapping, key: str) -> Any:
    node: Any = tree
    for part in key.split("."):
        node = node[part]
    return node


def get_ppo_default_config() -> ConfigDict:
    """The PPO defaults as a nested dict (seed article 004): the article's groups ``model``, ``train`` and ``reward``,
    plus the whole ``ppo_trainer`` tree (``data``, ``actor_rollout_ref``, ``critic``, ``reward_model``,
    ``custom_reward_function``, ``algorithm``, ``trainer``) with its values resolved.

    Unknown keys raise with the closest valid key, on assignment and when a trainer reads the dict. An article key
    and the tree key it spells (:data:`PPO_DICT_ALIASES`) both work; :func:`ppo_dict_to_overrides` turns the dict
    into the tree. ``algorithm.adv_estimator`` defaults to ``gae`` here (the main job's default is ``grpo``).
    """
    tree = OmegaConf.to_container(load_config("ppo_trainer", overrides=PPO_DICT_TREE_DEFAULTS), resolve=True)
    view: dict[str, Any] = {
        "model": {
            "pretrained_model_name_or_path": tree["actor_rollout_ref"]["model"]["path"],
            "tokenizer_name_or_path": tree["data"]["tokenizer"],
        },
        "train": {
            "dp_size": 1,
            "tp_size": 1,
            "pp_size": 1,
            "grad_accumulation_steps": 1,
            "use_amp": False,
        },
        "reward": {"model": "auto"},
    }
    for alias, key in PPO_DICT_ALIASES.items():
        group, leaf = alias.split(".")
        view[group][leaf] = _get_path(tree, key)
    view.update(tree)
    return ConfigDict(view, schema_keys=list(_flatten(view)))


def dict_key(dotted: str) -> str:
    """``train.lr`` -> ``config['train']['lr']``, how the article writes it."""
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
    article key and its tree key were both changed to different values or a value cannot be translated, and
    ``NotImplementedError`` for ``tp_size``/``pp_size``/``dp_size`` > 1.
    """
    view_defaults = get_ppo_default_config().to_dict()
    yaml_defaults = OmegaConf.to_container(load_config("ppo_trainer"), resolve=True)
    _check_known(config, view_defaults)
    cfg = _deep_merge(view_defaults, config)
    flat_cfg, flat_view, flat_yaml = (
        _flatten_leaves(cfg),
        _flatten_leaves(view_defaults),
        _flatten_leaves(yaml_defaults),
    )
    overrides = {k: v for k, v in flat_cfg.items() if k in flat_yaml and v != flat_yaml[k]}

    def changed(key: str) -> bool:
        return flat_cfg[key] != flat_view[key]

    for alias, key in PPO_DICT_ALIASES.items():
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


def _flatten_leaves(tree: Mapping, prefix: str = "") -> dict[str, Any]:
    """Dotted paths of the leaves (values that are not non-empty mappings)."""
    out: dict[str, Any] = {}
    for k, v in tree.items():
        path = f"{prefix}{k}"
        if isinstance(v, Mapping) and v:
            out.update(_flatten_leaves(v, path + "."))
        else:
            out[path] = v.to_dict() if isinstance(v, ConfigDict) else v
    return out
