"""An OpenAI-compatible HTTP server over a model directory or a training checkpoint, sampling with the rollout.

    python -m verl.trainer.main_generation_server --model_path DIR --engine hf|vllm --port 8000 \\
        [--tensor_parallel_size N] [--served_model_name NAME] [--max_model_len N] [--api_key KEY]

It listens on 127.0.0.1; on any other address (``--host 0.0.0.0``) it needs ``--api_key`` (or ``VERL_API_KEY``) or
an explicit ``--insecure_no_auth``. One caller's request is bounded (``--max_n``, ``--max_tokens_limit``,
``--max_request_bytes``) and so are the requests in flight (``--max_concurrent_requests``: 429 beyond);
docs/security.md.

Endpoints: ``/v1/models``, ``/v1/completions``, ``/v1/chat/completions`` (the model's chat template; tools and
function calling in the hermes format; streaming); concurrent requests are decoded together. Any OpenAI client
works: ``OpenAI(base_url="http://127.0.0.1:8000/v1", api_key="none")``. docs/serving.md lists what is supported.

``--engine hf`` samples with the built-in KV-cache sampler (`HFRollout`); ``--engine vllm`` with a vLLM engine in
this process (`vLLMRollout`, which also takes ``--tensor_parallel_size``). Either way the server drives the rollout's
per-request ``generate``, the call the agent loop uses, so a served model samples as it did in training.

SIGINT or SIGTERM stops it cleanly: no new connections, requests in flight finish (up to ``--shutdown_timeout``
seconds), the engine is shut down and the port is released.
"""

from __future__ import annotations

import argparse
import logging
import signal
import socket
import sys

from verl.experimental.openai_server.sampling import MAX_N

logger = logging.getLogger(__name__)
API_KEY_ENV = "VERL_API_KEY"


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m verl.trainer.main_generation_server",
        description="OpenAI-compatible server (/v1/models, /v1/completions, /v1/chat/completions) over a model "
        "directory or a training checkpoint.",
    )

    def arg(name: str, **kwargs) -> None:  # --model_path and --model-path both work
        p.add_argument(f"--{name}", *([f"--{name.replace('_', '-')}"] if "_" in name else []), **kwargs)

    arg("model_path", required=True, help="HF model directory, builtin:// model, or a checkpoint directory")
    arg("engine", default="hf", choices=["hf", "vllm"], help="hf: the built-in sampler; vllm: a vLLM engine")
    arg("host", default="127.0.0.1", help="address to listen on (0.0.0.0: every interface)")
    arg("port", type=int, default=8000)
    arg("tensor_parallel_size", type=int, default=1, help="devices one vLLM engine spans (--engine vllm)")
    arg("served_model_name", default=None, help="the model's name in the API (default: --model_path as given)")
    arg("max_model_len", type=int, default=None, help="prompt + response tokens (default: max_position_embeddings)")
    arg("max_num_seqs", type=int, default=64, help="requests decoded together at most")
    arg("dtype", default="fp32", choices=["fp32", "bf16", "fp16"], help="sampling precision")
    arg("device", default=None, choices=["cpu", "cuda"], help="default: cuda when available")
    arg("seed", type=int, default=0, help="the seed of requests that give none")
    arg("api_key", default=None, help=f"require Authorization: Bearer <key> (default: ${API_KEY_ENV})")
    arg("insecure_no_auth", action="store_true", help="listen beyond loopback without an API key")
    arg("max_n", type=int, default=MAX_N, help="choices per request at most (n x prompts)")
    arg("max_tokens_limit", type=int, default=None, help="tokens generated per choice at most (default: the context)")
    arg("max_request_bytes", type=int, default=4 << 20, help="largest request body (else 413)")
    arg("max_concurrent_requests", type=int, default=256, help="requests in flight at most (else 429)")
    arg("trust_remote_code", action="store_true", help="allow the model directory's own code")
    arg("shutdown_timeout", type=float, default=10.0, help="seconds requests in flight get to finish on SIGINT/TERM")
    arg("log_level", default="info", choices=["critical", "error", "warning", "info", "debug"])
    return p


def check_port_free(host: str, port: int) -> None:
    """Fail before loading the model when ``port`` is taken (uvicorn would only say so after the load)."""
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError as e:
            raise OSError(
                f"--port {port} on {host} is not available ({e.strerror}): stop what holds it or pick another port"
            ) from e


def close_engine(served) -> None:
    """Shut the engine down: vLLM's engine core (and its workers with tensor parallelism); the HF sampler's thread."""
    rollout = served.rollout
    executor = getattr(rollout, "_executor", None)
    if executor is not None:
        executor.shutdown(wait=True, cancel_futures=True)
    llm = getattr(rollout, "llm", None)
    if llm is not None:
        llm.llm_engine.engine_core.shutdown()
        from verl.workers.rollout.vllm_rollout.vllm_rollout import shutdown_vllm_process_group

        shutdown_vllm_process_group()


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), format="%(levelname)s %(name)s: %(message)s")
    from verl.experimental.openai_server.app import build_app, require_serve_dependencies

    require_serve_dependencies()
    import uvicorn

    from verl.experimental.openai_server.limits import ServerLimits
    from verl.experimental.openai_server.served_model import check_engine, load_served_model
    from verl.utils.http_guard import check_bind, resolve_api_key

    api_key = resolve_api_key(args.api_key, API_KEY_ENV)
    check_bind(
        args.host,
        api_key,
        args.insecure_no_auth,
        service="the OpenAI-compatible server",
        key_flag="--api_key",
        key_env=API_KEY_ENV,
        exposes="generate with this model and use its hardware",
    )
    limits = ServerLimits(args.max_n, args.max_tokens_limit, args.max_request_bytes, args.max_concurrent_requests)
    check_port_free(args.host, args.port)
    served = load_served_model(
        args.model_path,
        args.engine,
        served_model_name=args.served_model_name,
        max_model_len=args.max_model_len,
        tensor_parallel_size=args.tensor_parallel_size,
        dtype=args.dtype,
        device=args.device,
        seed=args.seed,
        max_num_seqs=args.max_num_seqs,
        trust_remote_code=args.trust_remote_code,
    )
    try:
        check_engine(served)
    except RuntimeError:
        close_engine(served)
        raise
    app = build_app(served, api_key=api_key, limits=limits)
    config = uvicorn.Config(
        app,
        host=args.host,
        port=args.port,
        log_level=args.log_level,
        timeout_graceful_shutdown=args.shutdown_timeout,
        access_log=args.log_level == "debug",
    )
    server = uvicorn.Server(config)
    # uvicorn shuts down gracefully on SIGINT/SIGTERM, then restores the handlers it found and raises the signal again;
    # with these handlers that second raise is a no-op, so the engine is still closed below and the exit status is 0
    # (Python's own SIGINT handler would raise KeyboardInterrupt, and SIGTERM's default would kill the process).
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: None)
    print(
        f"serving {served.name!r} ({served.model_dir}, engine {served.engine}, context {served.max_model_len}) at "
        f"http://{args.host}:{args.port}/v1",
        flush=True,
    )
    try:
        server.run()  # returns after SIGINT/SIGTERM, once requests in flight are done
    finally:
        close_engine(served)
    return 0 if server.started else 1


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (OSError, ValueError, ImportError) as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
