"""verl's module path for the algorithm core: a re-export of :mod:`verl.core_algos` (the leaf package that defines
it; see its docstring for the conventions and the module split).

``from verl.trainer.ppo import core_algos`` and ``from verl.trainer.ppo.core_algos import X`` keep working for every
name this module ever defined, private helpers included. The names are the same objects as in ``verl.core_algos``:
one estimator registry and one policy-loss registry, so registering through either path is visible through both.

Assigning a registry here (``core_algos.ADV_ESTIMATOR_REGISTRY = {...}``, as verl's own tests do to isolate one)
rebinds it in the module whose functions read it, so ``register_adv_est`` / ``get_adv_estimator_fn`` then use the
new dict, exactly as in verl where they live in this module. Rebinding any other attribute here
(``monkeypatch.setattr(core_algos, "agg_loss", ...)``) only affects code that looks it up through this module;
patch the defining module (e.g. ``verl.core_algos.policy_loss``) to reach the functions that call it internally.
"""

import sys
import types

from verl import core_algos as _leaf
from verl.core_algos import *  # noqa: F403 (every public name of the leaf package)
from verl.core_algos import advantage as _advantage_module
from verl.core_algos import policy_loss as _policy_loss_module
from verl.core_algos._config import _cfg_get  # noqa: F401
from verl.core_algos.advantage import _group_ids, _group_stats, _name  # noqa: F401
from verl.core_algos.kl import _kl_estimate, _kl_penalty  # noqa: F401
from verl.core_algos.policy_loss import (  # noqa: F401
    _clip_ranges,
    _dual_clip_ppo_losses,
    _policy_loss_option,
    _truncated_is,
)

__all__ = list(_leaf.__all__)

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
