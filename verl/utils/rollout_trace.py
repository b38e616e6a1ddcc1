"""Tracing rollout code (verl's ``verl.utils.rollout_trace``): each call of a method decorated with
``@rollout_trace_op`` becomes a span in Weave or MLflow, with its arguments as inputs and its result as output.

    RolloutTraceConfig.init(project_name, experiment_name, backend="weave")   # or "mlflow"; anything else: off
    with rollout_trace_attr(step=3, sample_index=7, rollout_n=0):
        await agent_loop.run(...)          # its @rollout_trace_op methods are traced, tagged with step/sample

Without ``init`` (or with another backend) the decorator calls the method unchanged. ``rollout_trace_attr(...,
trace=False)`` switches tracing off inside the block, nested calls included (to trace a sample of the rollouts).
This package's own rollout (``HFRollout``) is not traced; the module serves agent loops and tools ported from
verl. The backends are imported when first used (``pip install weave`` / ``mlflow``).
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import os
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from typing import Any

__all__ = ["RolloutTraceConfig", "rollout_trace_attr", "rollout_trace_op"]

_trace_enabled: ContextVar[bool] = ContextVar("_trace_enabled", default=True)


class RolloutTraceConfig:
    """The process's tracing settings (one per process; ``init`` once, ``reset`` in tests)."""

    _instance: RolloutTraceConfig | None = None

    def __init__(self) -> None:
        self.backend: str | None = None
        self.client: Any = None
        self.token2text = False
        self.project_name: str | None = None
        self.experiment_name: str | None = None
        self.max_samples_per_step_per_worker: int | None = None
        self._initialized = False

    @classmethod
    def get_instance(cls) -> RolloutTraceConfig:
        if cls._instance is None:
            cls._instance = cls()
        return cls._instance

    @classmethod
    def init(
        cls,
        project_name: str,
        experiment_name: str,
        backend: str | None,
        token2text: bool = False,
        max_samples_per_step_per_worker: int | None = None,
    ) -> None:
        """Choose the backend; a second call is ignored (the first one's client keeps the traces together).
        ``token2text``: a traced result with ``prompt_ids`` / ``response_ids`` also gets them decoded."""
        config = cls.get_instance()
        if config._initialized:
            return
        config.backend, config.token2text = backend, token2text
        config.project_name, config.experiment_name = project_name, experiment_name
        config.max_samples_per_step_per_worker = max_samples_per_step_per_worker
        if backend == "weave":
            import weave

            config.client = weave.init(project_name)
        elif backend == "mlflow":
            import mlflow

            mlflow.set_tracking_uri(os.environ.get("MLFLOW_TRACKING_URI", "sqlite:////tmp/mlruns.db"))
            mlflow.set_experiment(project_name)
            config.client = mlflow
        config._initialized = True

    @classmethod
    def get_backend(cls) -> str | None:
        return cls.get_instance().backend

    @classmethod
    def get_client(cls) -> Any:
        return cls.get_instance().client

    @classmethod
    def enable_token2text(cls) -> bool:
        return cls.get_instance().token2text

    @classmethod
    def reset(cls) -> None:
        cls._instance = None


@contextlib.contextmanager
def rollout_trace_attr(
    sample_index: Any = None,
    step: int | None = None,
    rollout_n: int | None = None,
    name: str = "rollout_trace",
    validate: bool = False,
    trace: bool = True,
) -> Iterator[None]:
    """Tag the traces made inside the block with the step, sample and rollout (``trace=False``: make none)."""
    backend = RolloutTraceConfig.get_backend()
    if backend is not None and not trace:
        token = _trace_enabled.set(False)
        try:
            yield
        finally:
            _trace_enabled.reset(token)
        return
    if backend not in ("weave", "mlflow"):
        yield
        return
    fields = {"sample_index": sample_index, "step": step, "rollout_n": rollout_n}
    attributes = {k: v for k, v in fields.items() if v is not None}
    attributes.update(validate=validate, experiment_name=RolloutTraceConfig.get_instance().experiment_name)
    if backend == "weave":
        import weave

        with weave.attributes(attributes):
            yield
    else:
        import mlflow

        with mlflow.start_span(name=name) as span:
            for key, value in attributes.items():
                mlflow.set_trace_tag(span.trace_id, str(key), str(value))
            yield


def _inputs(func: Callable, self: Any, args: tuple, kwargs: dict) -> dict[str, Any]:
    bound = inspect.signature(func).bind(self, *args, **kwargs)
    bound.apply_defaults()
    return {k: v for k, v in list(bound.arguments.items())[1:]}  # without self


def _with_text(owner: Any, result: Any) -> Any:
    """``result`` as a dict with ``prompt_text`` / ``response_text`` decoded by ``owner.tokenizer``, when it has
    token ids to decode (``token2text``)."""
    tokenizer = getattr(owner, "tokenizer", None)
    if not hasattr(result, "prompt_ids") or not hasattr(tokenizer, "decode"):
        return result
    out = result.model_dump() if hasattr(result, "model_dump") else dict(vars(result))
    out["prompt_text"] = tokenizer.decode(result.prompt_ids)
    if hasattr(result, "response_ids"):
        out["response_text"] = tokenizer.decode(result.response_ids)
    return out


def _weave_call(func: Callable, inputs: dict) -> tuple[Any, Any]:
    from weave.trace.context import call_context

    client = RolloutTraceConfig.get_client()
    attributes = dict(call_context.call_attributes.get() or {})
    return client, client.create_call(op=func.__qualname__, inputs=inputs, attributes=attributes)


def rollout_trace_op(func: Callable) -> Callable:
    """Trace each call of the method ``func`` (sync or ``async``) as a span named ``Class.method``."""

    def active() -> str | None:
        backend = RolloutTraceConfig.get_backend() if _trace_enabled.get() else None
        return backend if backend in ("weave", "mlflow") else None

    @functools.wraps(func)
    async def async_traced(self, *args: Any, **kwargs: Any) -> Any:
        backend = active()
        if backend is None:
            return await func(self, *args, **kwargs)
        inputs = _inputs(func, self, args, kwargs)
        shown = (lambda r: _with_text(self, r)) if RolloutTraceConfig.enable_token2text() else (lambda r: r)
        if backend == "weave":
            client, call = _weave_call(func, inputs)
            try:
                result = await func(self, *args, **kwargs)
            except Exception as e:
                client.finish_call(call, exception=e)
                raise
            client.finish_call(call, output=shown(result))
            return result
        import mlflow

        with mlflow.start_span(name=func.__qualname__) as span:
            span.set_inputs(inputs)
            result = await func(self, *args, **kwargs)
            span.set_outputs(shown(result))
        return result

    @functools.wraps(func)
    def traced(self, *args: Any, **kwargs: Any) -> Any:
        backend = active()
        if backend is None:
            return func(self, *args, **kwargs)
        if backend == "mlflow":
            import mlflow

            return mlflow.trace(func)(self, *args, **kwargs)
        client, call = _weave_call(func, _inputs(func, self, args, kwargs))
        try:
            result = func(self, *args, **kwargs)
        except Exception as e:
            client.finish_call(call, exception=e)
            raise
        client.finish_call(call, output=result)
        return result

    return async_traced if inspect.iscoroutinefunction(func) else traced
