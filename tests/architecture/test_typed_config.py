"""The loaded config is the job's dataclass, typed end to end (docs/architecture.md, "One typed config").

``load_config(job)`` returns an instance of the job's schema class: a tree of frozen ``BaseConfig`` sections. OmegaConf
merges files and overrides inside ``verl.utils.config_loader`` and nowhere else changes a config: this test parses
every module of ``verl/`` and fails on an import of ``open_dict`` or a call of ``OmegaConf.update``, ``set_struct``,
``set_readonly`` or ``merge`` outside ``config_loader.py``. ``ALLOWED`` lists the exceptions, each with its reason.
"""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from verl.base_config import BaseConfig
from verl.utils.config import JOBS, job_schema, load_config, merge_config, replace_keys, select, to_container, to_yaml
from verl.utils.config_loader import PREPARE

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "verl"

MUTATORS = {"update", "set_struct", "set_readonly", "merge"}

# (path under verl/, OmegaConf function) -> why it may be called there
ALLOWED: dict[tuple[str, str], str] = {
    ("utils/config_loader.py", "update"): "the merge stage: overrides set on the structured DictConfig",
    ("utils/config_loader.py", "merge"): "omega_conf_to_dataclass: a section's defaults merged with a dict",
    ("utils/ported_keys.py", "update"): "apply_ported_keys: the ppo_trainer job's PREPARE step, run by load_config on "
    "the merged DictConfig before the dataclass is built (verl's deprecated keys onto the ones that run)",
    ("utils/config_reference.py", "update"): "verl_defaults: verl's shipped key list (dotted keys, for the reference "
    "docs) made into a tree of its own to resolve its ${...}; no job config",
}


def config_mutations(source: str, path: str) -> list[tuple[str, str]]:
    """``(what, line)`` for each ``open_dict`` import and each ``OmegaConf.<mutator>(`` call in ``source``."""
    found = []
    for node in ast.walk(ast.parse(source, filename=path)):
        if isinstance(node, ast.ImportFrom) and any(a.name == "open_dict" for a in node.names):
            found.append(("open_dict", f"{path}:{node.lineno}: imports open_dict"))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in MUTATORS:
            if isinstance(node.func.value, ast.Name) and node.func.value.id == "OmegaConf":
                found.append((node.func.attr, f"{path}:{node.lineno}: OmegaConf.{node.func.attr}"))
    return found


def _all_mutations() -> list[tuple[str, str, str]]:
    out = []
    for module in sorted(PACKAGE.rglob("*.py")):
        path = module.relative_to(PACKAGE).as_posix()
        out += [(path, what, line) for what, line in config_mutations(module.read_text(), path)]
    return out


def test_no_config_is_changed_outside_the_loader():
    found = [line for path, what, line in _all_mutations() if (path, what) not in ALLOWED]
    assert not found, "change a copy instead (verl.utils.config.replace_keys):\n" + "\n".join(found)


def test_the_allowlist_has_no_stale_entry():
    used = {(path, what) for path, what, _ in _all_mutations()}
    assert set(ALLOWED) <= used, f"stale entries: {set(ALLOWED) - used}"


def test_the_guard_catches_a_synthetic_offender():
    offender = (
        "from omegaconf import OmegaConf, open_dict\n"
        "def f(cfg):\n"
        "    OmegaConf.update(cfg, 'a', 1)\n"
        "    OmegaConf.set_struct(cfg, False)\n"
        "    return OmegaConf.merge(cfg, {}), OmegaConf.select(cfg, 'a')\n"
    )
    assert [what for what, _ in config_mutations(offender, "x.py")] == ["open_dict", "update", "set_struct", "merge"]


@pytest.mark.parametrize("job", sorted(JOBS))
def test_load_config_returns_the_jobs_frozen_dataclass(job):
    cfg = load_config(job)
    assert type(cfg) is job_schema(job) and isinstance(cfg, BaseConfig)
    first = dataclasses.fields(cfg)[0].name
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(cfg, first, getattr(cfg, first))
    # the mapping interface ported code uses
    assert cfg[first] is getattr(cfg, first) and cfg.get(first) is getattr(cfg, first) and first in dict(cfg)


@pytest.mark.parametrize(
    "job, argv",
    [
        *((job, []) for job in sorted(JOBS)),
        (
            "ppo_trainer",
            [
                "+trainer.added=1",
                "reward_model.reward_kwargs={x: [1, 2]}",
                "actor_rollout_ref.actor.optim.warmup_style=cosine",  # a ported key: PREPARE maps it
                "critic.ppo_micro_batch_size=8",
            ],
        ),
    ],
)
def test_the_dataclass_serialises_as_the_merged_config_did(job, argv):
    """``to_yaml`` of the loaded dataclass is the text OmegaConf gave for the merged, prepared ``DictConfig``: run
    directories keep the same ``config.yaml``."""
    merged = merge_config(job, argv)
    if job in PREPARE:
        module, _, function = PREPARE[job].rpartition(".")
        getattr(__import__(module, fromlist=[function]), function)(merged)
    assert to_yaml(load_config(job, argv)) == OmegaConf.to_yaml(merged)


def test_a_changed_copy_leaves_the_loaded_config_as_it_is():
    cfg = load_config("ppo_trainer", ["+trainer.added=1"])
    changed = replace_keys(cfg, {"algorithm.gamma": 0.5, "reward_model.reward_kwargs.k": 2})
    assert (cfg.algorithm.gamma, changed.algorithm.gamma) == (1.0, 0.5)
    assert changed.reward_model.reward_kwargs == {"k": 2} and cfg.reward_model.reward_kwargs == {}
    assert changed.trainer is cfg.trainer and changed.actor_rollout_ref is cfg.actor_rollout_ref  # shared, not copied
    assert select(changed, "trainer.added") == 1 and select(changed, "trainer.nope", default=None) is None
    ported = OmegaConf.create({"algorithm": {"gamma": 0.9}})  # a DictConfig from ported code: a changed copy too
    assert replace_keys(ported, {"algorithm.gamma": 0.5}).algorithm.gamma == 0.5 and ported.algorithm.gamma == 0.9


def test_verls_dictconfig_is_loaded_at_the_controllers_boundary():
    """verl's entry points hand the controller a Hydra-composed ``DictConfig``: ``RayPPOTrainer`` (through
    ``as_ppo_config``) loads it as overrides, so it runs the same tree ``load_config`` gives."""
    from verl.utils.ppo_config import as_ppo_config

    cfg = load_config("ppo_trainer", ["algorithm.adv_estimator=gae"])
    composed = OmegaConf.create(to_container(cfg))
    loaded = as_ppo_config(composed, device_name="cpu")
    assert type(loaded) is type(cfg) and to_yaml(loaded) == to_yaml(cfg)
    assert as_ppo_config(cfg) is cfg
