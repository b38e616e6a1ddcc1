"""The FastAPI application of the OpenAI-compatible server: routes, error answers, the optional API key.

Routes: ``GET /health``, ``GET /stats`` (how the engine batched requests), ``GET /v1/models``, ``GET /v1/models/{id}``, ``POST /v1/chat/completions``,
``POST /v1/completions``. With an API key every route but ``/health`` needs it; request bodies, choices per request,
tokens per choice and requests in flight are bounded (`ServerLimits`, `verl.utils.http_guard`). Every request is checked before it reaches the engine; a bad one is answered with a 4xx and
OpenAI's error object (`errors`) naming the field, and an engine failure with a 500 -- the server keeps serving.

Requests run concurrently on uvicorn's event loop; each choice is one call of the rollout's ``async generate``, which
batches the calls in flight into one decode. Streaming (``stream: true``) sends OpenAI's SSE chunks: the role chunk at
once, then -- the engines return a response when it is complete -- the content, tool calls and finish reason
together, and ``data: [DONE]``.
"""

# no `from __future__ import annotations`: FastAPI reads the handlers' annotations (Request, imported in build_app
# with fastapi, an optional dependency) at definition time
import json
import logging
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from verl.experimental.openai_server.chat import chat_chunks, chat_response, read_chat_request, role_chunk
from verl.experimental.openai_server.completions import completion_chunks, completion_response, read_completion_request
from verl.experimental.openai_server.errors import RequestError, error_body
from verl.experimental.openai_server.generation import generate_choices
from verl.experimental.openai_server.limits import ServerLimits
from verl.experimental.openai_server.served_model import ServedModel
from verl.utils.http_guard import ServiceGuard

logger = logging.getLogger(__name__)

__all__ = ["build_app", "require_serve_dependencies"]

SERVE_EXTRA = 'pip install -e ".[serve]"'


def require_serve_dependencies() -> None:
    """fastapi and uvicorn are the ``serve`` extra's: a missing one is an ImportError naming the install command."""
    import importlib

    for module in ("fastapi", "uvicorn"):
        try:
            importlib.import_module(module)
        except ImportError as e:
            raise ImportError(
                f"the OpenAI-compatible server needs {module} ({e}): install the serve extra, {SERVE_EXTRA}"
            ) from e


def _sse(obj: dict[str, Any] | str) -> str:
    return f"data: {obj if isinstance(obj, str) else json.dumps(obj, ensure_ascii=False)}\n\n"


async def _read_body(request: Any) -> dict[str, Any]:
    raw = await request.body()
    try:
        body = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        where = f": {e.msg} at line {e.lineno} column {e.colno}" if isinstance(e, json.JSONDecodeError) else ""
        raise RequestError(f"the request body is not valid JSON{where}") from e
    if not isinstance(body, dict):
        raise RequestError(f"the request body must be a JSON object, got {type(body).__name__}")
    return body


def _model_card(served: ServedModel) -> dict[str, Any]:
    return {
        "id": served.name,
        "object": "model",
        "created": served.created,
        "owned_by": "verl",
        "root": served.model_dir,
        "max_model_len": served.max_model_len,
    }


def _check_model(served: ServedModel, body: dict[str, Any]) -> None:
    model = body.get("model")
    if model is not None and not isinstance(model, str):
        raise RequestError(f"'model' must be a string, got {type(model).__name__}", param="model")
    if model is not None and model != served.name:
        raise RequestError(
            f"the model {model!r} does not exist: this server serves {served.name!r} (GET /v1/models)",
            param="model",
            status=404,
            code="model_not_found",
        )


def _add_error_handlers(app: Any) -> None:
    """A request error as OpenAI's error object with its 4xx; anything else a 500 -- the server keeps serving."""
    from fastapi import Request
    from fastapi.responses import JSONResponse
    from starlette.exceptions import HTTPException

    @app.exception_handler(RequestError)
    async def request_error(_: Request, e: RequestError) -> JSONResponse:
        return JSONResponse(error_body(e.message, e.status, e.param, e.code), status_code=e.status)

    @app.exception_handler(HTTPException)
    async def http_error(_: Request, e: HTTPException) -> JSONResponse:
        return JSONResponse(error_body(str(e.detail), e.status_code), status_code=e.status_code)

    @app.exception_handler(Exception)
    async def server_error(_: Request, e: Exception) -> JSONResponse:
        logger.exception("request failed")
        return JSONResponse(error_body(f"internal server error: {type(e).__name__}: {e}", 500), status_code=500)


def _stream(head: list[dict], work: Awaitable[Any], chunks: Callable[[Any], list[dict]]) -> Any:
    """SSE: ``head`` at once, then ``chunks(await work)``; an error after the headers went out is sent as an error
    event (the status line is already 200), then ``[DONE]``."""
    from fastapi.responses import StreamingResponse

    async def events() -> AsyncIterator[str]:
        for chunk in head:
            yield _sse(chunk)
        try:
            result = await work
        except RequestError as e:
            yield _sse(error_body(e.message, e.status, e.param, e.code))
        except Exception as e:
            logger.exception("streamed request failed")
            yield _sse(error_body(f"internal server error: {type(e).__name__}: {e}", 500))
        else:
            for chunk in chunks(result):
                yield _sse(chunk)
        yield _sse("[DONE]")

    return StreamingResponse(events(), media_type="text/event-stream")


def _batching_stats(served: ServedModel) -> dict[str, Any]:
    """How the engine has batched requests so far (the rollout's `RequestBatcher`): requests and batches decoded, the
    mean and largest batch."""
    sizes = list(getattr(getattr(served.rollout, "_batcher", None), "batch_sizes", []))
    return {
        "engine": served.engine,
        "requests": sum(sizes),
        "batches": len(sizes),
        "mean_batch_size": sum(sizes) / len(sizes) if sizes else 0.0,
        "max_batch_size": max(sizes, default=0),
    }


def build_app(served: ServedModel, api_key: str | None = None, limits: ServerLimits | None = None) -> Any:
    """The ASGI app serving ``served``. With ``api_key`` every route but ``/health`` needs ``Authorization: Bearer
    <key>`` (compared in constant time); ``limits`` bound what one caller may ask (`ServerLimits`)."""
    require_serve_dependencies()
    from fastapi import FastAPI, Request
    from fastapi.responses import JSONResponse

    limits = limits or ServerLimits()
    app = FastAPI(title="verl OpenAI-compatible server", docs_url=None, redoc_url=None, openapi_url=None)
    tokenizer, rollout = served.tokenizer, served.rollout

    _add_error_handlers(app)

    @app.get("/health")
    async def health() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/stats")
    async def stats() -> dict[str, Any]:
        return _batching_stats(served)

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        return {"object": "list", "data": [_model_card(served)]}

    @app.get("/v1/models/{model_id:path}")
    async def model(model_id: str) -> dict[str, Any]:
        _check_model(served, {"model": model_id})
        return _model_card(served)

    @app.post("/v1/chat/completions")
    async def chat_completions(request: Request) -> Any:
        body = await _read_body(request)
        _check_model(served, body)
        chat = read_chat_request(body, tokenizer, served.max_model_len, served.vocab_size)
        limits.check_choices(chat.sampling.n)
        chat.max_tokens = limits.cap_tokens(chat.sampling.max_tokens, chat.max_tokens)
        ids = {"request_id": f"chatcmpl-{uuid.uuid4().hex}", "model": served.name, "created": int(time.time())}
        work = generate_choices(rollout, tokenizer, chat.prompt_ids, chat.sampling, chat.max_tokens, ids["request_id"])
        if not chat.stream:
            return JSONResponse(chat_response(chat, await work, tokenizer, **ids))
        head = [role_chunk(i, **ids) for i in range(chat.sampling.n)]
        return _stream(head, work, lambda choices: chat_chunks(chat, choices, tokenizer, **ids))

    @app.post("/v1/completions")
    async def completions(request: Request) -> Any:
        import asyncio

        body = await _read_body(request)
        _check_model(served, body)
        req = read_completion_request(body, tokenizer, served.max_model_len, served.vocab_size)
        limits.check_choices(req.sampling.n, len(req.prompts))
        req.max_tokens = [limits.cap_tokens(req.sampling.max_tokens, m) for m in req.max_tokens]
        ids = {"request_id": f"cmpl-{uuid.uuid4().hex}", "model": served.name, "created": int(time.time())}
        work = asyncio.gather(
            *[
                generate_choices(rollout, tokenizer, p, req.sampling, m, f"{ids['request_id']}-{i}")
                for i, (p, m) in enumerate(zip(req.prompts, req.max_tokens))
            ]
        )
        if not req.stream:
            return JSONResponse(completion_response(req, await work, tokenizer, **ids))
        return _stream([], work, lambda per_prompt: completion_chunks(req, per_prompt, tokenizer, **ids))

    return ServiceGuard(
        app,
        error_body=error_body,
        api_key=api_key,
        max_body_bytes=limits.max_request_bytes,
        max_in_flight=limits.max_concurrent_requests,
        protected=lambda path: path != "/health",
        limited=lambda path: path.startswith("/v1/") and path.endswith("completions"),
    )
