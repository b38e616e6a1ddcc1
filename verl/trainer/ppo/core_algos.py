"""verl's module path for the algorithm core: a re-export of :mod:`verl.core_algos` (the leaf package that defines
it; see its docstring for the conventions and the module split).

``from verl.trainer.ppo import core_algos`` and ``from verl.trainer.ppo.core_algos import X`` keep working for every
name this module ever defined, private helpers included. The names are the same objects as in ``verl.core_algos``
(but for the functions that read a config, below): one estimator registry and one policy-loss registry, so
registering through either path is visible through both.

Assigning a registry here (``core_algos.ADV_ESTIMATOR_REGISTRY = {...}``, as verl's own tests do to isolate one)
rebinds it in the module whose functions read it, so ``register_adv_est`` / ``get_adv_estimator_fn`` then use the
new dict, exactly as in verl where they live in this module. Rebinding any other attribute here
(``monkeypatch.setattr(core_algos, "agg_loss", ...)``) only affects code that looks it up through this module;
patch the defining module (e.g. ``verl.core_algos.policy_loss``) to reach the functions that call it internally.

The exceptions are the functions that read a config: here each one converts its config once, with
``verl.utils.config.as_section``, and calls the leaf's function (``__wrapped__``). verl's code and tests pass a
dataclass, a ``DictConfig`` or, in ported scripts, a plain dict; a dict or untyped ``DictConfig`` becomes the
schema's section (``ActorConfig``, ``AlgoConfig``, ``KLControlConfig``) with the schema's defaults for the keys it
leaves out, and None the section's defaults (the advantage estimators keep None: "no config"). The leaf takes typed
sections only: it sits below the schema (``verl.core_algos`` docstring). The registries hold the leaf's functions;
``get_policy_loss_fn`` / ``get_adv_estimator_fn`` here return the converting ones, so a look-up by name gives the
same object as the name here (as in verl), and a function registered by user code as it is.
"""

import functools
import inspect
import sys
import types
from collections.abc import Callable
from typing import Any

from verl import core_algos as _leaf
from verl.core_algos import *  # noqa: F403 (every public name of the leaf package)
from verl.core_algos import advantage as _advantage_module
from verl.core_algos import policy_loss as _policy_loss_module
from verl.core_algos.advantage import _group_ids, _group_stats, _name  # noqa: F401
from verl.core_algos.kl import _kl_estimate, _kl_penalty  # noqa: F401
from verl.core_algos.policy_loss import _clip_ranges, _dual_clip_ppo_losses, _truncated_is  # noqa: F401
from verl.trainer.config.algorithm import AlgoConfig, KLControlConfig
from verl.utils.config import as_section
from verl.workers.config.actor import ActorConfig

__all__ = list(_leaf.__all__)


# the leaf's function -> the one here that converts its config first
_CONVERTING: dict[Callable, Callable] = {}


def _converting(fn: Callable, section_type: type, param: str = "config", keep_none: bool = False) -> Callable:
    """``fn`` with its ``param`` argument converted to ``section_type`` first (None stays None with ``keep_none``)."""
    signature = inspect.signature(fn)

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        bound = signature.bind(*args, **kwargs)
        value = bound.arguments.get(param)
        if value is not None or not keep_none:
            bound.arguments[param] = as_section(value, section_type)
        return fn(*bound.args, **bound.kwargs)

    _CONVERTING[fn] = wrapper
    return wrapper


def _as_here(fn: Callable) -> Callable:
    """The function here for a registered one: the converting one for the leaf's, a user's own as it is."""
    return _CONVERTING.get(fn, fn)


def get_policy_loss_fn(name: str) -> Callable:
    """The policy loss registered under ``name`` (verl's function; see the module docstring)."""
    return _as_here(_leaf.get_policy_loss_fn(name))


def get_adv_estimator_fn(name: str) -> Callable:
    """The advantage estimator registered under ``name`` (verl's function; see the module docstring)."""
    return _as_here(_leaf.get_adv_estimator_fn(name))


# every policy loss reads the actor section (compute_policy_loss, verl's deprecated form, takes plain numbers)
for _loss_name in [name for name in _leaf.__all__ if name.startswith("compute_policy_loss_")]:
    globals()[_loss_name] = _converting(getattr(_leaf, _loss_name), ActorConfig)
del _loss_name

compute_grpo_passk_outcome_advantage = _converting(
    _leaf.compute_grpo_passk_outcome_advantage, AlgoConfig, keep_none=True
)
compute_reinforce_plus_plus_outcome_advantage = _converting(
    _leaf.compute_reinforce_plus_plus_outcome_advantage, AlgoConfig, keep_none=True
)
compute_gdpo_outcome_advantage = _converting(_leaf.compute_gdpo_outcome_advantage, AlgoConfig, keep_none=True)
get_kl_controller = _converting(_leaf.get_kl_controller, KLControlConfig, param="kl_ctrl")

# registry name -> the module whose functions read it as a global
_REGISTRY_HOMES = {
    "ADV_ESTIMATOR_REGISTRY": _advantage_module,
    "POLICY_LOSS_REGISTRY": _policy_loss_module,
}


class _CoreAlgosModule(types.ModuleType):
    """This module, with registry assignments forwarded to the leaf modules that read them."""

    def __setattr__(self, name: str, value) -> None:
        home = _REGISTRY_HOMES.get(name)
        if home is not None:
            setattr(home, name, value)
            setattr(_leaf, name, value)
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _CoreAlgosModule
