"""The agent loop's step metrics, from the batch's per-trajectory columns (so they describe the rows the step
trains on, also after DAPO's filtering):

- ``num_turns/{min,max,mean}`` (verl's): chat turns per trajectory (user, assistant, tool; the prompt counts one);
- ``agent_loop/generate_sequences/{min,max,mean}``, ``agent_loop/tool_calls/{min,max,mean}`` (verl's): seconds per
  trajectory waiting for the model's turns and for tool calls;
- ``agent_loop/num_tool_calls/{mean,max}``: tool calls per trajectory (every call the model wrote, malformed ones
  included);
- ``agent_loop/tool_errors/mean`` (per trajectory), ``agent_loop/tool_errors/total`` and
  ``agent_loop/tool_errors/<kind>`` (totals by kind: malformed, over_limit, unknown_tool, bad_arguments, tool_error,
  exception, timeout, bad_return: `verl.experimental.agent_loop.tool_calls`), ``agent_loop/tool_error_rate``
  (errors / calls);
- ``agent_loop/tool_latency_s/{mean,max}``: seconds per call of the calls whose tool ran (create, execute,
  release);
- ``agent_loop/tool_response_truncated``: observations cut to ``max_tool_response_length``;
- ``agent_loop/assistant_turns/mean``, ``agent_loop/user_turns/mean``;
- ``agent_loop/tokenization_mismatch``: share of trajectories whose ids differ from the template's rendering;
- ``agent_loop/finish_reason/<reason>``: share of trajectories that ended so (stop, length, ...).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np

from verl.experimental.agent_loop.tool_calls import ERROR_KINDS

__all__ = ["agent_loop_metrics"]


def _stats(prefix: str, values: list[float], which: tuple[str, ...] = ("min", "max", "mean")) -> dict[str, float]:
    arr = np.asarray(values, dtype=np.float64)
    return {f"{prefix}/{w}": float(getattr(arr, w)()) for w in which} if arr.size else {}


def agent_loop_metrics(non_tensor_batch: dict[str, Any]) -> dict[str, float]:
    """The metrics of the module docstring; {} for a batch the agent loop did not generate."""
    metrics: dict[str, float] = {}
    if "__num_turns__" in non_tensor_batch:
        metrics.update(_stats("num_turns", [float(t) for t in non_tensor_batch["__num_turns__"]]))
    rows = [r for r in non_tensor_batch.get("agent_loop_metrics", []) if isinstance(r, dict)]
    if rows:
        for key in ("generate_sequences", "tool_calls"):
            metrics.update(_stats(f"agent_loop/{key}", [float(r.get(key, 0.0)) for r in rows]))
        if any("num_tool_calls" in r for r in rows):
            metrics.update(_tool_metrics(rows))
    reasons = non_tensor_batch.get("finish_reason")
    if reasons is not None and len(reasons):
        for reason, count in sorted(Counter(str(r) for r in reasons).items()):
            metrics[f"agent_loop/finish_reason/{reason}"] = count / len(reasons)
    return metrics


def _tool_metrics(rows: list[dict[str, Any]]) -> dict[str, float]:
    def column(key: str) -> list[float]:
        return [float(r.get(key, 0)) for r in rows]

    calls, errors, runs = column("num_tool_calls"), column("tool_errors"), sum(column("tool_runs"))
    metrics = _stats("agent_loop/num_tool_calls", calls, ("mean", "max"))
    metrics["agent_loop/tool_errors/mean"] = float(np.mean(errors))
    metrics["agent_loop/tool_errors/total"] = float(sum(errors))
    for kind in ERROR_KINDS:
        metrics[f"agent_loop/tool_errors/{kind}"] = float(sum(column(f"tool_errors/{kind}")))
    metrics["agent_loop/tool_error_rate"] = sum(errors) / sum(calls) if sum(calls) else 0.0
    metrics["agent_loop/tool_latency_s/mean"] = sum(column("tool_latency_sum")) / runs if runs else 0.0
    metrics["agent_loop/tool_latency_s/max"] = max(column("tool_latency_max"))
    metrics["agent_loop/tool_response_truncated"] = float(sum(column("tool_response_truncated")))
    metrics["agent_loop/assistant_turns/mean"] = float(np.mean(column("assistant_turns")))
    metrics["agent_loop/user_turns/mean"] = float(np.mean(column("user_turns")))
    metrics["agent_loop/tokenization_mismatch"] = float(np.mean(column("tokenization_mismatch")))
    return metrics
