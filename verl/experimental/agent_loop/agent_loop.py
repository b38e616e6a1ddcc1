"""verl's import path for the agent loop's names (``from verl.experimental.agent_loop.agent_loop import
AgentLoopManager``). They live in `verl.experimental.agent_loop.base` (the interface and the registry),
`verl.experimental.agent_loop.worker` and `verl.experimental.agent_loop.server_manager`; the loops and the worker
import ``base``, never this module, so it can import them all.
"""

from verl.experimental.agent_loop.base import (
    AgentLoopBase,
    AgentLoopMetrics,
    AgentLoopOutput,
    DictConfigWrap,
    agent_loop_class,
    load_agent_loop_config,
    register,
    registered_agent_loops,
)
from verl.experimental.agent_loop.server_manager import AsyncLLMServerManager
from verl.experimental.agent_loop.worker import AgentLoopManager, AgentLoopWorker

__all__ = [
    "AgentLoopBase",
    "AgentLoopManager",
    "AgentLoopMetrics",
    "AgentLoopOutput",
    "AgentLoopWorker",
    "AsyncLLMServerManager",
    "DictConfigWrap",
    "agent_loop_class",
    "load_agent_loop_config",
    "register",
    "registered_agent_loops",
]
