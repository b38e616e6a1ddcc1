"""``python -m verl.sandbox.server``: SandboxFusion's HTTP API over the local sandbox.

    python -m verl.sandbox.server --port 8080 --max-concurrent 8
    # then, in the training config: reward_model.sandbox_fusion.url=http://127.0.0.1:8080/run_code

``POST /run_code`` takes and returns SandboxFusion's JSON (:mod:`verl.sandbox.fusion_api`), so one config works
against a SandboxFusion deployment and against this server. A request it cannot run gets a 400 naming the field;
at most ``--max-concurrent`` programs run at once and at most ``--max-pending`` requests wait or run (more get a
429). ``GET /v1/ping`` answers ``"pong"`` as SandboxFusion's does; ``GET /health`` answers the isolation in effect.

It fails closed: without bubblewrap it refuses to start, unless ``--isolation rlimit`` accepts resource limits
only; then it warns at start and every answer says so (the ``isolation`` field and the ``X-Sandbox-Isolation``
header). It listens on 127.0.0.1; on any other address it needs ``--api-key`` (or ``VERL_SANDBOX_API_KEY``; clients
send ``Authorization: Bearer <key>``) or an explicit ``--insecure-no-auth``. docs/security.md. Needs the ``serve``
extra (``pip install -e ".[serve]"``: FastAPI and uvicorn).
"""

import argparse
import sys
import threading
import warnings
from typing import Any

from verl.sandbox.local import ISOLATIONS, RLIMIT_WARNING, SandboxConfig, SandboxUnavailable, resolve_isolation

API_KEY_ENV = "VERL_SANDBOX_API_KEY"
ISOLATION_HEADER = "X-Sandbox-Isolation"
MAX_BODY_BYTES = 4 << 20  # code and stdin; SandboxFusion's "files" are refused anyway
SERVER_OPT_IN = "--isolation rlimit"


def _error(message: str, status: int = 400) -> dict[str, Any]:
    return {"status": "SandboxError", "message": message}


def create_app(
    max_concurrent: int = 8,
    isolation: str = "bwrap",
    *,
    api_key: str | None = None,
    max_pending: int = 64,
    max_body_bytes: int = MAX_BODY_BYTES,
) -> Any:
    """The FastAPI application (run it with uvicorn, or use ``main``). ``isolation`` is what ``main`` resolved at
    start ("bwrap" or "rlimit"): every program runs under it and every answer names it."""
    try:
        from fastapi import FastAPI, Request
        from fastapi.responses import JSONResponse
    except ImportError as e:
        raise ImportError('the sandbox server needs FastAPI and uvicorn: pip install -e ".[serve]"') from e

    from verl.sandbox.fusion_api import RequestError, run_request
    from verl.utils.http_guard import ServiceGuard

    if max_concurrent < 1:
        raise ValueError(f"--max-concurrent must be >= 1, got {max_concurrent}")
    if isolation not in ISOLATIONS:
        raise ValueError(f"isolation must be one of {list(ISOLATIONS)}, got {isolation!r}")
    slots = threading.BoundedSemaphore(max_concurrent)
    app = FastAPI(title="verl sandbox (SandboxFusion API)", docs_url=None, redoc_url=None, openapi_url=None)

    @app.get("/v1/ping")
    def ping() -> str:
        return "pong"

    @app.get("/health")
    def health() -> dict[str, Any]:
        return {"status": "ok", "isolation": isolation, "max_concurrent": max_concurrent, "max_pending": max_pending}

    @app.post("/run_code")
    async def run_code_endpoint(request: Request) -> Any:
        try:
            payload = await request.json()
        except ValueError:
            return JSONResponse({**_error("the request body is not valid JSON"), "isolation": isolation}, 400)
        from starlette.concurrency import run_in_threadpool

        def run() -> dict:
            with slots:
                return run_request(payload, isolation=isolation)

        try:
            return await run_in_threadpool(run)
        except RequestError as e:
            return JSONResponse({**_error(str(e)), "isolation": isolation}, 400)

    open_paths = ("/v1/ping", "/health")
    return ServiceGuard(
        app,
        error_body=lambda message, status: {**_error(message, status), "isolation": isolation},
        api_key=api_key,
        max_body_bytes=max_body_bytes,
        max_in_flight=max_pending,
        protected=lambda path: path not in open_paths,
        limited=lambda path: path not in open_paths,
        response_headers={ISOLATION_HEADER: isolation},
    )


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m verl.sandbox.server", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (another than loopback needs a key)")
    p.add_argument("--port", type=int, default=8080)
    p.add_argument("--max-concurrent", type=int, default=8, help="programs run at once")
    p.add_argument("--max-pending", type=int, default=64, help="requests running or waiting; more get a 429")
    p.add_argument("--max-body-bytes", type=int, default=MAX_BODY_BYTES, help="largest request body (else 413)")
    p.add_argument(
        "--isolation",
        default="bwrap",
        choices=ISOLATIONS,
        help="bwrap (default): namespaces + resource limits, or refuse to start; rlimit: resource limits only "
        "(the code can read this machine's files and reach its network)",
    )
    p.add_argument("--api-key", default=None, help=f"require Authorization: Bearer <key> (default: ${API_KEY_ENV})")
    p.add_argument("--insecure-no-auth", action="store_true", help="listen beyond loopback without a key")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from verl.utils.http_guard import InsecureBindError, check_bind, resolve_api_key

    api_key = resolve_api_key(args.api_key, API_KEY_ENV)
    try:
        check_bind(
            args.host,
            api_key,
            args.insecure_no_auth,
            service="the sandbox server",
            key_env=API_KEY_ENV,
            exposes="run programs on this machine",
        )
        with warnings.catch_warnings():  # said below, once, as a line of the server's own
            warnings.simplefilter("ignore")
            isolation = resolve_isolation(SandboxConfig(isolation=args.isolation), opt_in=SERVER_OPT_IN)
    except (InsecureBindError, SandboxUnavailable) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if isolation == "rlimit":
        print(f"WARNING: {RLIMIT_WARNING}", file=sys.stderr, flush=True)
    import uvicorn

    app = create_app(
        args.max_concurrent,
        isolation,
        api_key=api_key,
        max_pending=args.max_pending,
        max_body_bytes=args.max_body_bytes,
    )
    print(
        f"sandbox server at http://{args.host}:{args.port}/run_code (isolation: {isolation}"
        f"{', API key required' if api_key else ''})",
        flush=True,
    )
    uvicorn.run(app, host=args.host, port=args.port, log_level="info")
    return 0


if __name__ == "__main__":
    sys.exit(main())
