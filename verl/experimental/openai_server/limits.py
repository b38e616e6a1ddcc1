"""What one caller may ask of the OpenAI-compatible server: choices per request, tokens per choice, body size and
requests in flight. Each bound is a server flag; a request over one is a 400 naming the field (413 for the body,
429 for the requests in flight: `verl.utils.http_guard.ServiceGuard`)."""

from __future__ import annotations

from dataclasses import dataclass

from verl.experimental.openai_server.errors import RequestError
from verl.experimental.openai_server.sampling import MAX_N

__all__ = ["ServerLimits"]


@dataclass(frozen=True)
class ServerLimits:
    """The server's bounds (``python -m verl.trainer.main_generation_server --help`` names their flags)."""

    max_n: int = MAX_N  # choices per request: n, times the prompts of a /v1/completions request (--max_n)
    max_tokens: int | None = None  # tokens generated per choice (--max_tokens_limit); None: the context length
    max_request_bytes: int = 4 << 20  # request body (--max_request_bytes): 413 above
    max_concurrent_requests: int = 256  # requests in flight (--max_concurrent_requests): 429 above

    def __post_init__(self) -> None:
        for key in ("max_n", "max_request_bytes", "max_concurrent_requests"):
            if getattr(self, key) < 1:
                raise ValueError(f"{key} must be >= 1, got {getattr(self, key)}")
        if self.max_tokens is not None and self.max_tokens < 1:
            raise ValueError(f"max_tokens_limit must be >= 1, got {self.max_tokens}")

    def check_choices(self, n: int, prompts: int = 1) -> None:
        """A request for more than ``max_n`` choices in all is a 400."""
        if n * prompts > self.max_n:
            what = f"n={n}" if prompts == 1 else f"n={n} x {prompts} prompts = {n * prompts} choices"
            raise RequestError(f"{what} is more than this server returns per request ({self.max_n})", param="n")

    def cap_tokens(self, asked: int | None, budget: int) -> int:
        """Tokens to generate: ``budget`` (what fits the context, or ``max_tokens`` as asked) within the server's
        limit; an explicit ``max_tokens`` over the limit is a 400, an unset one is cut to it."""
        if self.max_tokens is None or budget <= self.max_tokens:
            return budget
        if asked is not None:
            raise RequestError(
                f"max_tokens={asked} is more than this server generates per choice ({self.max_tokens})",
                param="max_tokens",
            )
        return self.max_tokens
