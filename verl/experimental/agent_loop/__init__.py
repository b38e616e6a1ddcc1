"""verl's agent loop (``verl.experimental.agent_loop``): multi-turn rollouts with tools over the rollout's async
``generate``, token in, token out (docs/agent_loop.md).

- `base`: ``AgentLoopBase``, ``AgentLoopOutput``, the ``@register`` registry (verl's path for them and the worker's
  names: `agent_loop`);
- `single_turn_agent_loop`, `tool_agent_loop`: the built-in loops (``single_turn_agent``, ``tool_agent``);
- `worker`: ``AgentLoopWorker`` / ``AgentLoopManager`` (a batch of loops, concurrently, into the trainer's batch);
- `server_manager`: ``AsyncLLMServerManager`` and each trajectory's seeded, lockstep view of it;
- `chat_turns`, `tokenization_check`: the turns' token ids and verl's tokenization sanity check;
- `tool_parser`, `tool_calls`, `environment`: parsing the model's calls, running them, loading tools/interactions;
- `batch_output`, `metrics`: padding trajectories into the batch, and the step metrics.
"""

from verl.experimental.agent_loop.base import (
    AgentLoopBase,
    AgentLoopMetrics,
    AgentLoopOutput,
    DictConfigWrap,
    register,
)
from verl.experimental.agent_loop.server_manager import AsyncLLMServerManager
from verl.experimental.agent_loop.single_turn_agent_loop import SingleTurnAgentLoop
from verl.experimental.agent_loop.tool_agent_loop import ToolAgentLoop
from verl.experimental.agent_loop.tool_parser import FunctionCall, HermesToolParser, ParsedToolCalls, ToolParser
from verl.experimental.agent_loop.worker import AgentLoopManager, AgentLoopWorker

__all__ = [
    "AgentLoopBase",
    "AgentLoopManager",
    "AgentLoopMetrics",
    "AgentLoopOutput",
    "AgentLoopWorker",
    "AsyncLLMServerManager",
    "DictConfigWrap",
    "FunctionCall",
    "HermesToolParser",
    "ParsedToolCalls",
    "SingleTurnAgentLoop",
    "ToolAgentLoop",
    "ToolParser",
    "register",
]
