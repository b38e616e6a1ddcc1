"""Search spaces: a YAML file mapping config paths to distributions, turned into ``key=value`` overrides per trial.

    params:
      actor_rollout_ref.actor.optim.lr: {type: float, low: 1.0e-4, high: 1.0e-3, log: true}
      algorithm.kl_ctrl.kl_coef:        {type: float, low: 0.01, high: 0.2}
      data.train_batch_size:            {type: categorical, choices: [32, 64]}
      actor_rollout_ref.rollout.n:      {type: int, low: 4, high: 16, step: 4}
    fixed:                              # set in every trial, never searched
      algorithm.use_kl_in_reward: true

Distribution types: ``float`` (``low``, ``high``, optional ``log: true`` or ``step``), ``int`` (``low``, ``high``,
optional ``step`` or ``log``), ``categorical`` (``choices``); ``loguniform`` is ``float`` with ``log: true``. An
optional ``grid:`` list gives the values the grid sampler visits (categorical choices and stepped ints have one
already). The Optuna parameter name is the config path itself, so a best trial's params are ready-made overrides.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from typing import Any

import yaml

# Estimators whose advantages read algorithm.gamma (see verl/core_algos/advantage.py); the others ignore it.
GAMMA_ESTIMATORS = ("gae", "reinforce_plus_plus")

# Five parameters that decide PPO-family runs (kl_coef, gamma, rollout size, actor lr, reward temperature) on our keys.
# docs/tune.md explains each range; the actor lr range is moved up from the usual 1e-6..5e-5 (an 8B model's
# range) because the shipped 2 MB policy trains at 2e-4 by default and barely moves below 1e-5 in a short budget.
DEFAULT_SEARCH_SPACE_YAML = """\
# The default search space of `python -m verl.trainer.main_tune` (docs/tune.md#the-default-search-space):
# five parameters that decide PPO-family runs, on verl's config keys.
params:
  algorithm.kl_ctrl.kl_coef:                  # usual kl_coef range [0.01, 0.2]: KL penalty in the reward
    type: float
    low: 0.01
    high: 0.2
  algorithm.gamma:                            # usual gamma range [0.9, 0.999]: only gae / reinforce_plus_plus read it
    type: float
    low: 0.9
    high: 0.999
  data.train_batch_size:                      # rollout size (usual 16..128): prompts per rollout
    type: categorical
    choices: [32, 64]                     # multiples of ppo_mini_batch_size (16 by default)
  actor_rollout_ref.actor.optim.lr:           # usual actor lr [1e-6, 5e-5] (large models), moved up for the tiny model
    type: float
    low: 1.0e-4
    high: 1.0e-3
    log: true
  algorithm.reward_temp:                      # usual reward_temp range [0.5, 2.0]: rewards are divided by it
    type: float
    low: 0.5
    high: 2.0
fixed:
  algorithm.use_kl_in_reward: true            # makes kl_coef act (the default config has no KL term)
"""


class SearchSpaceError(ValueError):
    """A bad search-space file; the message names the file, the parameter and the fix."""


@dataclass
class Param:
    path: str
    type: str  # float | int | categorical
    low: float | int | None = None
    high: float | int | None = None
    log: bool = False
    step: float | int | None = None
    choices: list | None = None
    grid: list | None = None

    def suggest(self, trial) -> Any:
        if self.type == "categorical":
            return trial.suggest_categorical(self.path, self.choices)
        if self.type == "int":
            return trial.suggest_int(self.path, int(self.low), int(self.high), step=int(self.step or 1), log=self.log)
        return trial.suggest_float(self.path, float(self.low), float(self.high), step=self.step, log=self.log)

    def distribution(self):
        import optuna.distributions as d

        if self.type == "categorical":
            return d.CategoricalDistribution(self.choices)
        if self.type == "int":
            return d.IntDistribution(int(self.low), int(self.high), step=int(self.step or 1), log=self.log)
        return d.FloatDistribution(float(self.low), float(self.high), step=self.step, log=self.log)

    def grid_values(self) -> list:
        if self.grid is not None:
            return list(self.grid)
        if self.type == "categorical":
            return list(self.choices)
        if self.type == "int" and not self.log:
            return list(range(int(self.low), int(self.high) + 1, int(self.step or 1)))
        if self.type == "float" and self.step:
            n = int(round((self.high - self.low) / self.step))
            return [self.low + i * self.step for i in range(n + 1)]
        raise SearchSpaceError(
            f"parameter {self.path!r}: the grid sampler needs a finite set of values; add `grid: [v1, v2, ...]` "
            "to it (or a `step:`), or use another sampler"
        )

    def examples(self) -> list:
        """Every value a trial may set that the schema should accept: each choice, each grid value, both ends."""
        if self.type == "categorical":
            values = list(self.choices)
        else:
            cast = int if self.type == "int" else float
            values = [cast(self.low), cast(self.high)]
        return values + [v for v in (self.grid or []) if v not in values]


@dataclass
class SearchSpace:
    params: dict[str, Param]
    fixed: dict[str, Any] = field(default_factory=dict)
    source: str = "<default>"

    def suggest(self, trial) -> dict[str, Any]:
        """Sample every parameter on ``trial``; returns ``{config_path: value}``."""
        return {path: p.suggest(trial) for path, p in self.params.items()}

    def overrides(self, values: dict[str, Any]) -> list[str]:
        """``key=value`` command-line overrides for the fixed block and the sampled ``values``."""
        return [format_override(k, v) for k, v in {**self.fixed, **values}.items()]

    def grid(self) -> dict[str, list]:
        return {path: p.grid_values() for path, p in self.params.items()}

    def without(self, paths) -> SearchSpace:
        return SearchSpace({k: v for k, v in self.params.items() if k not in paths}, dict(self.fixed), self.source)


def format_override(key: str, value: Any) -> str:
    if isinstance(value, bool):
        text = "true" if value else "false"
    elif isinstance(value, float):
        text = repr(value)  # full precision; YAML reads 1e-05 as a float in our loader's float keys
        if "e" in text and "." not in text.split("e")[0]:
            mant, exp = text.split("e")
            text = f"{mant}.0e{exp}"
    elif value is None:
        text = "null"
    elif isinstance(value, (list, dict)):
        text = yaml.safe_dump(value, default_flow_style=True).strip()
    elif isinstance(value, str) and yaml.safe_load(value) != value:  # 'true', '1', 'a: b' would read back changed
        text = yaml.safe_dump(value, default_style="'").strip()
    else:
        text = str(value)
    return f"{key}={text}"


_TYPES = {
    "float": "float",
    "uniform": "float",
    "int": "int",
    "integer": "int",
    "categorical": "categorical",
    "choice": "categorical",
    "loguniform": "float",
    "log_float": "float",
    "log_uniform": "float",
}
_KEYS = {"type", "low", "high", "log", "step", "choices", "grid", "help"}


def _line_of(text: str, key: str) -> str:
    for i, line in enumerate(text.splitlines(), 1):
        if line.strip().startswith(f"{key}:"):
            return f" (line {i})"
    return ""


def _num(v: Any, where: str, name: str) -> float:
    if isinstance(v, str):
        try:
            v = float(v)  # YAML 1.1 reads 1e-5 (no dot) as a string
        except ValueError:
            pass
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise SearchSpaceError(f"{where}: `{name}` must be a finite number, got {v!r}")
    return v


def parse_param(path: str, spec: Any, where: str) -> Param:
    if isinstance(spec, list):  # shorthand: a list is a categorical
        spec = {"type": "categorical", "choices": spec}
    if not isinstance(spec, dict):
        raise SearchSpaceError(
            f"{where}: expected a mapping like {{type: float, low: 0.1, high: 1.0}} or a list of choices, got {spec!r}"
        )
    unknown = set(spec) - _KEYS
    if unknown and all(isinstance(spec[k], dict) for k in unknown):  # a nested tree instead of dotted paths
        raise SearchSpaceError(
            f"{where}: write each parameter as one dotted config path, e.g. `{path}.{sorted(unknown)[0]}: "
            "{type: float, low: ..., high: ...}`, not a nested tree"
        )
    if unknown:
        raise SearchSpaceError(f"{where}: unknown field(s) {sorted(unknown)}; allowed: {sorted(_KEYS - {'help'})}")
    raw_type = str(spec.get("type", "categorical" if "choices" in spec else "float")).lower()
    if raw_type not in _TYPES:
        raise SearchSpaceError(f"{where}: unknown type {raw_type!r}; use float, int, loguniform or categorical")
    kind = _TYPES[raw_type]
    log = spec.get("log", raw_type.startswith("log"))
    if not isinstance(log, bool):
        raise SearchSpaceError(f"{where}: `log` must be true or false (unquoted), got {log!r}")
    grid = spec.get("grid")
    if grid is not None and (not isinstance(grid, list) or not grid):
        raise SearchSpaceError(f"{where}: `grid` must be a non-empty list")
    if kind == "categorical":
        choices = spec.get("choices")
        if not isinstance(choices, list) or not choices:
            raise SearchSpaceError(f"{where}: a categorical needs a non-empty `choices: [...]` list")
        for c in choices:
            if not (c is None or isinstance(c, (bool, int, float, str))):
                raise SearchSpaceError(f"{where}: choices must be numbers, strings, booleans or null, got {c!r}")
        return Param(path, "categorical", choices=choices, grid=grid)
    if "low" not in spec or "high" not in spec:
        raise SearchSpaceError(f"{where}: a {kind} needs `low` and `high`")
    low, high = _num(spec["low"], where, "low"), _num(spec["high"], where, "high")
    step = spec.get("step")
    if step is not None:
        step = _num(step, where, "step")
        if step <= 0:
            raise SearchSpaceError(f"{where}: `step` must be positive")
        if log:
            raise SearchSpaceError(f"{where}: `step` and `log` cannot be combined (Optuna does not support it)")
    if low > high:
        raise SearchSpaceError(f"{where}: low={low} is above high={high}")
    if log and low <= 0:
        raise SearchSpaceError(f"{where}: a log-scale range needs low > 0, got low={low}")
    if kind == "int":
        for name, v in (("low", low), ("high", high), ("step", step)):
            if v is not None and float(v) != int(v):
                raise SearchSpaceError(f"{where}: an int parameter needs an integer `{name}`, got {v!r}")
        return Param(path, "int", int(low), int(high), log, int(step) if step else None, grid=grid)
    return Param(path, "float", float(low), float(high), log, float(step) if step else None, grid=grid)


def parse_search_space(data: Any, source: str = "<search space>", text: str = "") -> SearchSpace:
    if not isinstance(data, dict):
        raise SearchSpaceError(f"{source}: the top level must be a mapping with `params:` (and optionally `fixed:`)")
    extra = set(data) - {"params", "fixed"}
    if extra:
        raise SearchSpaceError(
            f"{source}: unknown top-level key(s) {sorted(extra)}; put parameters under `params:` and constant "
            "overrides under `fixed:`"
        )
    params_raw = data.get("params") or {}
    fixed = data.get("fixed") or {}
    if not isinstance(params_raw, dict):
        raise SearchSpaceError(f"{source}: `params:` must map config paths to distributions")
    if not isinstance(fixed, dict):
        raise SearchSpaceError(f"{source}: `fixed:` must map config paths to values")
    params = {}
    for path, spec in params_raw.items():
        path = str(path)
        params[path] = parse_param(path, spec, f"{source}: parameter {path!r}{_line_of(text, path)}")
    both = set(params) & set(map(str, fixed))
    if both:
        raise SearchSpaceError(f"{source}: {sorted(both)} both searched (params) and fixed (fixed); keep one")
    if not params:
        raise SearchSpaceError(f"{source}: `params:` is empty; nothing to search")
    return SearchSpace(params, {str(k): v for k, v in fixed.items()}, source)


def load_search_space(path: str | None = None) -> SearchSpace:
    """Parse a search-space YAML file (``None``: the built-in default space)."""
    if path is None:
        text, source = DEFAULT_SEARCH_SPACE_YAML, "<default search space>"
    else:
        source = os.fspath(path)
        try:
            with open(os.path.expanduser(source)) as f:
                text = f.read()
        except FileNotFoundError:
            raise SearchSpaceError(f"search-space file {source!r} does not exist") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise SearchSpaceError(f"{source} is not valid YAML: {e}") from None
    return parse_search_space(data, source, text)


def check_against_config(
    space: SearchSpace, base_argv: list[str], drop_unknown: bool = False
) -> tuple[SearchSpace, list[str]]:
    """Validate every searched and fixed key (and a value of its type) against the PPO config schema.

    Returns the space (inert parameters dropped) and notes to print. A key the schema lacks is an error naming the
    closest key, unless ``drop_unknown`` (the built-in space, whose keys may be newer than an installed config)."""
    from verl.utils.config import ConfigError, load_config

    notes: list[str] = []
    drop = set()
    try:  # the base overrides on their own first: a typo there is not a search parameter's fault
        load_config("ppo_trainer", list(base_argv))
    except ConfigError as e:
        raise SearchSpaceError(f"base overrides (the command line after the options): {e}") from None
    for path, p in space.params.items():
        for value in p.examples():
            try:
                load_config("ppo_trainer", [*base_argv, *space.overrides({}), format_override(path, value)])
            except ConfigError as e:
                if drop_unknown and "unknown config key" in str(e):
                    drop.add(path)
                    notes.append(f"{path} is not a key of this version's config: left out of the search")
                    break
                raise SearchSpaceError(f"{space.source}: parameter {path!r}, value {value!r}: {e}") from None
    try:
        cfg = load_config("ppo_trainer", [*base_argv, *space.overrides({})])
    except ConfigError as e:
        raise SearchSpaceError(f"{space.source}: `fixed:` block or base overrides: {e}") from None
    est = cfg.algorithm.adv_estimator
    if (
        "algorithm.gamma" in space.params
        and "algorithm.adv_estimator" not in space.params
        and est not in GAMMA_ESTIMATORS
    ):
        drop.add("algorithm.gamma")
        notes.append(
            f"algorithm.gamma is inert with algorithm.adv_estimator={est} (only {', '.join(GAMMA_ESTIMATORS)} read it): "
            "left out of the search"
        )
    kl_active = cfg.algorithm.use_kl_in_reward or "algorithm.use_kl_in_reward" in space.params
    if "algorithm.kl_ctrl.kl_coef" in space.params and not kl_active:
        notes.append(
            "algorithm.kl_ctrl.kl_coef is searched but algorithm.use_kl_in_reward=false: it has no effect "
            "(add `algorithm.use_kl_in_reward: true` under fixed:)"
        )
    return space.without(drop), notes
