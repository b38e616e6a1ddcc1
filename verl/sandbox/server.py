"""``python -m verl.sandbox.server``: SandboxFusion's HTTP API over the local sandbox.

    python -m verl.sandbox.server --host 127.0.0.1 --port 8080 --max-concurrent 8
    # then, in the training config: reward_model.sandbox_fusion.url=http://127.0.0.1:8080/run_code

``POST /run_code`` takes and returns SandboxFusion's JSON (:mod:`verl.sandbox.fusion_api`), so one config works
against a SandboxFusion deployment and against this server. A request it cannot run gets a 400 naming the field;
at most ``--max-concurrent`` programs run at once (the rest wait). ``GET /v1/ping`` answers ``"pong"`` as
SandboxFusion's does. Needs the ``serve`` extra (``pip install -e ".[serve]"``: FastAPI and uvicorn).
"""

import argparse
import threading
from typing import Any


def create_app(max_concurrent: int = 8) -> Any:
    """The FastAPI application (run it with uvicorn, or use ``main``)."""
    try:
        from fastapi import FastAPI, Request
        from fastapi.responses import JSONResponse
    except ImportError as e:
        raise ImportError('the sandbox server needs FastAPI and uvicorn: pip install -e ".[serve]"') from e

    from verl.sandbox.fusion_api import RequestError, run_request

    if max_concurrent < 1:
        raise ValueError(f"--max-concurrent must be >= 1, got {max_concurrent}")
    slots = threading.BoundedSemaphore(max_concurrent)
    app = FastAPI(title="verl sandbox (SandboxFusion API)")

    @app.get("/v1/ping")
    def ping() -> str:
        return "pong"

    @app.post("/run_code")
    async def run_code_endpoint(request: Request) -> Any:
        try:
            payload = await request.json()
        except ValueError:
            return JSONResponse({"status": "SandboxError", "message": "the request body is not valid JSON"}, 400)
        from starlette.concurrency import run_in_threadpool

        def run() -> dict:
            with slots:
                return run_request(payload)

        try:
            return await run_in_threadpool(run)
        except RequestError as e:
            return JSONResponse({"status": "SandboxError", "message": str(e)}, 400)

    return app


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8080)
    p.add_argument("--max-concurrent", type=int, default=8, help="programs run at once")
    args = p.parse_args(argv)
    import uvicorn

    uvicorn.run(create_app(args.max_concurrent), host=args.host, port=args.port, log_level="info")


if __name__ == "__main__":
    main()
