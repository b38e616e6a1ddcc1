"""The agent-loop interface (verl's names): what one trajectory returns, the base class a loop subclasses, and the
registry that maps a row's ``agent_name`` to a loop class. verl's import path for these and for the worker's names
is `verl.experimental.agent_loop.agent_loop`, which re-exports them; the loops and the worker import this module.

A loop turns one data row into one trajectory: it renders the row's messages, asks the rollout server for the model's
turn (token ids in, token ids and their log-probs out), runs tools or a simulated user between turns, and returns
`AgentLoopOutput`: the prompt's ids, then every response-side id -- the model's own tokens and the tokenized tool/user
turns -- with ``response_mask`` 1 on the model's tokens only. The worker (`verl.experimental.agent_loop.worker`) runs
one loop instance per row, all rows concurrently, and pads the outputs into the trainer's batch.

Registering a loop:

    @register("my_agent")
    class MyAgentLoop(AgentLoopBase):
        async def run(self, sampling_params, **kwargs) -> AgentLoopOutput: ...

or, without importing it first, through ``actor_rollout_ref.rollout.agent.agent_loop_config_path``: verl's YAML list
``- name: my_agent`` / ``_target_: my_pkg.my_module.MyAgentLoop`` (further keys are passed to the constructor).
"""

from __future__ import annotations

import asyncio
import importlib
import os
from abc import ABC, abstractmethod
from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = [
    "AgentLoopBase",
    "AgentLoopMetrics",
    "AgentLoopOutput",
    "DictConfigWrap",
    "agent_loop_class",
    "load_agent_loop_config",
    "register",
    "registered_agent_loops",
]


@dataclass
class AgentLoopMetrics:
    """verl's per-trajectory timing fields; a loop may return them or a plain dict with these and more keys."""

    generate_sequences: float = 0.0  # seconds waiting for the model's turns
    tool_calls: float = 0.0  # seconds waiting for tool calls
    num_preempted: int = -1  # times the engine preempted the requests (-1: not reported)

    def model_dump(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class AgentLoopOutput:
    """One trajectory (verl's fields). ``response_ids``, ``response_mask`` and ``response_logprobs`` have one entry
    per response-side token: the model's tokens (mask 1, their sampling log-probs) and the tokens of tool or user
    turns placed between them (mask 0, log-prob 0)."""

    prompt_ids: list[int]  # the rendered prompt, unpadded
    response_ids: list[int]  # model tokens and tool/user-turn tokens, in order
    response_mask: list[int]  # 1: a token the model sampled; 0: a token of a tool or user turn
    response_logprobs: list[float] | None = None  # sampling log-prob of each response token (0 where mask is 0)
    routed_experts: Any = None  # MoE routing: not recorded here
    multi_modal_data: dict[str, Any] | None = None  # images/videos of multimodal tools: not supported here
    reward_score: float | None = None  # a score the loop computed itself; None: the reward function scores it
    num_turns: int = 0  # chat turns: user (the prompt and simulated users), assistant, tool
    metrics: dict[str, Any] | AgentLoopMetrics = field(default_factory=dict)  # per-trajectory counters and timings
    extra_fields: dict[str, Any] = field(default_factory=dict)  # per-trajectory values kept as batch columns

    def model_dump(self) -> dict[str, Any]:
        return asdict(self)


class DictConfigWrap:
    """verl's wrapper around the job config handed to a loop's constructor (it kept hydra from resolving it)."""

    def __init__(self, config: Any):
        self.config = config


class AgentLoopBase(ABC):
    """One instance per trajectory. The constructor's arguments are verl's, so a loop written for verl fits:
    ``trainer_config`` (the job config, wrapped), ``server_manager`` (``await server_manager.generate(request_id,
    prompt_ids=..., sampling_params=...) -> TokenOutput``), ``tokenizer``, ``processor`` (None: text models only),
    ``dataset_cls`` and ``dataset_config`` (the ``data`` section, wrapped)."""

    def __init__(
        self,
        trainer_config: DictConfigWrap,
        server_manager: Any,
        tokenizer: Any,
        processor: Any = None,
        dataset_cls: type | None = None,
        dataset_config: DictConfigWrap | None = None,
        **kwargs: Any,
    ):
        self.config = trainer_config.config
        self.server_manager = server_manager
        self.tokenizer = tokenizer
        self.processor = processor
        self.dataset_cls = dataset_cls
        self.dataset_config = dataset_config.config if dataset_config is not None else None
        self.apply_chat_template_kwargs: dict[str, Any] = {}
        try:  # verl's attribute; loops are built inside the worker's event loop
            self.loop = asyncio.get_running_loop()
        except RuntimeError:
            self.loop = None

    async def apply_chat_template(
        self, messages: list[dict], tools: list[dict] | None = None, remove_system_prompt: bool = False, **_: Any
    ) -> list[int]:
        """The token ids of ``messages`` rendered with the chat template and the generation prompt (verl's helper;
        ``remove_system_prompt`` drops the system block a template adds on its own, for appending turns)."""
        from verl.experimental.agent_loop.chat_turns import ChatTurns

        turns, loop = ChatTurns.of(self.tokenizer), asyncio.get_running_loop()
        if remove_system_prompt:
            return await loop.run_in_executor(None, turns.delta_ids, messages, "")
        return await loop.run_in_executor(None, turns.prompt_ids, messages, tools)

    @abstractmethod
    async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> AgentLoopOutput:
        """One trajectory. ``sampling_params``: vLLM-style settings for every model turn (the server adds each
        request's own seed); ``kwargs``: the row's columns (``raw_prompt``, ``extra_info``, ``tools_kwargs``,
        ``index``, ...)."""


_HERE = os.path.dirname(os.path.abspath(__file__))  # verl/experimental/agent_loop

# agent name -> {"_target_": "module.Class", **constructor kwargs} (verl's registry entries)
_agent_loop_registry: dict[str, dict[str, Any]] = {}
# agent name -> the class @register saw: used as is, so a loop defined in a script or notebook needs no import path
_registered_classes: dict[str, type] = {}


def register(agent_name: str):
    """Class decorator: rows whose ``agent_name`` is ``agent_name`` run this loop."""

    def decorator(subclass: type[AgentLoopBase]) -> type[AgentLoopBase]:
        _agent_loop_registry[agent_name] = {"_target_": f"{subclass.__module__}.{subclass.__qualname__}"}
        _registered_classes[agent_name] = subclass
        return subclass

    return decorator


def registered_agent_loops() -> list[str]:
    return sorted(_agent_loop_registry)


def load_agent_loop_config(path: str) -> list[str]:
    """Register the loops of verl's agent-loop YAML (a list of ``{name, _target_, ...}``); returns their names. A
    relative path is read from the working directory, then from the project root (as verl resolves it)."""
    from omegaconf import OmegaConf

    resolved = _resolve_path(path)
    entries = OmegaConf.to_container(OmegaConf.load(resolved), resolve=True)
    key = "actor_rollout_ref.rollout.agent.agent_loop_config_path"
    if not isinstance(entries, list):
        raise ValueError(f"{key}={path!r}: expected a YAML list of {{name: ..., _target_: module.Class}} entries")
    names = []
    for i, entry in enumerate(entries):
        if not isinstance(entry, dict) or not entry.get("name") or not entry.get("_target_"):
            raise ValueError(f"{key}={path!r}: entry {i} needs a name and a _target_ (module.Class), got {entry!r}")
        entry = dict(entry)
        name = str(entry.pop("name"))
        _agent_loop_registry[name] = entry
        names.append(name)
    return names


def agent_loop_class(agent_name: str) -> tuple[type[AgentLoopBase], dict[str, Any]]:
    """The class registered for ``agent_name`` and the extra constructor kwargs of its registry entry."""
    entry = _agent_loop_registry.get(agent_name)
    if entry is None:
        raise KeyError(
            f"agent_name={agent_name!r} is not a registered agent loop (registered: {registered_agent_loops()}); "
            "register it with @register(name) or in actor_rollout_ref.rollout.agent.agent_loop_config_path, or fix "
            "the data's agent_name column / rollout.agent.default_agent_loop"
        )
    target = entry["_target_"]
    cls = _registered_classes.get(agent_name)
    if cls is None or f"{cls.__module__}.{cls.__qualname__}" != target:  # a YAML entry: import its _target_
        module_name, _, class_name = target.rpartition(".")
        try:
            cls = getattr(importlib.import_module(module_name), class_name)
        except (ImportError, AttributeError, ValueError) as e:
            raise ImportError(f"agent loop {agent_name!r}: cannot import _target_ {target!r}: {e}") from e
    if not (isinstance(cls, type) and issubclass(cls, AgentLoopBase)):
        raise TypeError(f"agent loop {agent_name!r}: {target} is not an AgentLoopBase subclass")
    return cls, {k: v for k, v in entry.items() if k != "_target_"}


def _resolve_path(path: str) -> str:
    candidates = [path] if os.path.isabs(path) else [os.path.abspath(path)]
    if not os.path.isabs(path):  # the project root: the directory holding the verl package
        candidates.append(os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(_HERE))), path))
    for candidate in candidates:
        if os.path.isfile(candidate):
            return candidate
    raise FileNotFoundError(f"agent loop config {path!r} not found (looked at {candidates})")
