"""Before any model loads: how will the model-written code that this job runs be isolated? Resolved once, so a
machine without bubblewrap stops the job at start with one error instead of running a policy's programs unconfined.

The job runs model-written code on this machine when a data set has a code data source scored by the built-in
scorer in the local sandbox (no ``reward_model.sandbox_fusion.url``), or when its tools include one that runs code
locally (``code_interpreter`` without ``sandbox_fusion_url``: the tool resolves its isolation when it is built, which
happens here). A scorer of the user's own that calls the sandbox is caught at its first call: the sandbox raises
``SandboxUnavailable`` and the reward managers let it stop the run (`verl.workers.reward_manager.scoring`).
docs/security.md.
"""

from __future__ import annotations

from typing import Any

from verl.sandbox.local import SandboxConfig, SandboxUnavailable, resolve_isolation, set_default_isolation
from verl.utils.ppo_config import uses_agent_loop

__all__ = ["code_running_sources", "resolve_code_isolation"]

CONFIG_OPT_IN = "sandbox.isolation=rlimit"


def code_running_sources(datasets: dict[str, Any], key: str) -> list[str]:
    """``"<config key>: data_source 'x'"`` for each code data source (scored by running the response's program) in
    ``datasets`` (``{config key: dataset}``; a dataset without an ``items`` list is read as it comes: skipped)."""
    from verl.utils.reward_score.prime_code import CODE_DATA_SOURCES

    found = []
    for where, dataset in datasets.items():
        items = getattr(dataset, "items", None)
        if isinstance(items, list):
            sources = sorted({str(item.get(key)) for item in items if item.get(key) in CODE_DATA_SOURCES})
            found += [f"{where}: data_source {source!r}" for source in sources]
    return found


def resolve_code_isolation(config: Any, datasets: dict[str, Any], compute_score: Any = None) -> str | None:
    """Apply ``sandbox.isolation``; when the built-in scorer will run code answers of ``datasets`` in the local
    sandbox, resolve the isolation now ("bwrap" or "rlimit"), raising ``SandboxUnavailable`` that names the data and
    the fixes where bubblewrap cannot start. Then build the run's tools (a local ``code_interpreter`` resolves its
    own). Returns the isolation of the scorer's runs, None when it runs none."""
    set_default_isolation(config.sandbox.isolation)  # read by the reward threads, the tools and child processes
    isolation = None
    own_scorer = compute_score is not None or config.custom_reward_function.path or config.reward_model.enable
    remote = config.reward_model.sandbox_fusion.url or config.reward.sandbox_fusion.url
    sources = [] if own_scorer or remote else code_running_sources(datasets, config.data.reward_fn_key)
    if sources:
        try:
            isolation = resolve_isolation(SandboxConfig(), opt_in=CONFIG_OPT_IN)
        except SandboxUnavailable as e:
            raise SandboxUnavailable(f"this job scores code by running it ({'; '.join(sources)}): {e}") from None
    mt = config.actor_rollout_ref.rollout.multi_turn
    if uses_agent_loop(config) and (mt.tool_config_path or mt.function_tool_path):
        from verl.experimental.agent_loop.environment import load_tools  # cached for the agent loop

        load_tools(mt.tool_config_path, mt.function_tool_path)
    return isolation
