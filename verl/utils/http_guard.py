"""Safe defaults for every network service of verl: the OpenAI-compatible server, the sandbox server, and the ones
that come later (the training gateway). docs/security.md states the rules; this module is where they live.

- **Where it listens.** Services listen on 127.0.0.1 by default. Bound to any other address (``0.0.0.0``, a LAN
  address, a host name) a service refuses to start without an API key, unless the user says ``--insecure-no-auth``
  (`check_bind`): anyone who reaches the port could otherwise run code or use the GPU.
- **Who may call it.** With a key, the protected routes need ``Authorization: Bearer <key>``; the key is compared in
  constant time (`keys_match`), so the answer's timing does not reveal how much of a guess was right.
- **How much one caller may ask.** A request body over ``max_body_bytes`` is a 413; more than ``max_in_flight``
  requests at once get a 429 with ``Retry-After`` (`ServiceGuard`). What a single request may ask for (``n``,
  ``max_tokens``, a time limit) is each service's own check, with a 400 naming the field.

`ServiceGuard` is plain ASGI middleware (no framework import here), so any ASGI app takes it.
"""

from __future__ import annotations

import hmac
import ipaddress
import os
import warnings
from collections.abc import Awaitable, Callable
from typing import Any

__all__ = [
    "InsecureBindError",
    "ServiceGuard",
    "bearer_token",
    "check_bind",
    "is_loopback",
    "keys_match",
    "resolve_api_key",
]

ErrorBody = Callable[[str, int], dict[str, Any]]


class InsecureBindError(ValueError):
    """A service asked to listen beyond this machine without an API key (the message names the fixes)."""


def is_loopback(host: str) -> bool:
    """True when ``host`` is reachable from this machine only: ``localhost``, 127.0.0.0/8 or ``::1``. A host name
    other than ``localhost`` counts as reachable from elsewhere (it may resolve to any interface)."""
    host = host.strip().strip("[]")
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def resolve_api_key(flag_value: str | None, env_name: str) -> str | None:
    """The service's API key: the command-line flag, else the environment variable ``env_name`` (which keeps the key
    out of the process list), else None."""
    key = flag_value if flag_value is not None else os.environ.get(env_name)
    return key or None


def check_bind(
    host: str,
    api_key: str | None,
    insecure_no_auth: bool,
    *,
    service: str,
    key_flag: str = "--api-key",
    key_env: str | None = None,
    exposes: str = "use it",
) -> None:
    """Refuse to listen on ``host`` beyond this machine without an API key (`InsecureBindError` naming the fixes);
    ``--insecure-no-auth`` allows it with a warning. ``exposes`` says what a stranger could do (for the message)."""
    if is_loopback(host) or api_key:
        return
    where = f"{key_flag} KEY" + (f" (or set {key_env})" if key_env else "")
    if insecure_no_auth:
        warnings.warn(
            f"{service} listens on {host} without an API key (--insecure-no-auth): anyone who reaches this port can "
            f"{exposes}",
            RuntimeWarning,
            stacklevel=2,
        )
        return
    raise InsecureBindError(
        f"{service} refuses to listen on {host} without an API key: anyone who reaches it could {exposes}. Pass "
        f"{where}, or listen on 127.0.0.1 (the default), or pass --insecure-no-auth to serve without a key"
    )


def keys_match(given: str | None, expected: str) -> bool:
    """Constant-time comparison of a presented key with the service's."""
    if given is None:
        return False
    return hmac.compare_digest(given.encode("utf-8"), expected.encode("utf-8"))


def bearer_token(headers: list[tuple[bytes, bytes]]) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header among ASGI ``headers``, else None."""
    for name, value in headers:
        if name.lower() == b"authorization":
            scheme, _, token = value.decode("latin-1").partition(" ")
            return token.strip() if scheme.lower() == "bearer" else None
    return None


class _TooLarge(Exception):
    pass


class ServiceGuard:
    """ASGI middleware: API key (401), body size (413) and requests in flight (429) for ``app``.

    ``protected(path)`` says which routes need the key (health checks usually do not); ``limited(path)`` which count
    toward ``max_in_flight`` (a streamed response counts until its last byte). ``error_body(message, status)`` shapes
    the JSON of a refusal the way the service's clients read errors. ``response_headers`` are added to every answer
    (e.g. the sandbox's isolation)."""

    def __init__(
        self,
        app: Any,
        *,
        error_body: ErrorBody,
        api_key: str | None = None,
        max_body_bytes: int = 4 << 20,
        max_in_flight: int = 256,
        protected: Callable[[str], bool] = lambda path: True,
        limited: Callable[[str], bool] = lambda path: True,
        response_headers: dict[str, str] | None = None,
    ) -> None:
        if max_body_bytes < 1 or max_in_flight < 1:
            raise ValueError(f"max_body_bytes and max_in_flight must be >= 1, got {max_body_bytes}, {max_in_flight}")
        self.app = app
        self.error_body = error_body
        self.api_key = api_key
        self.max_body_bytes = max_body_bytes
        self.max_in_flight = max_in_flight
        self.protected = protected
        self.limited = limited
        self.headers = [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in (response_headers or {}).items()]
        self.in_flight = 0  # one event loop: no lock needed
        self.refused = {401: 0, 413: 0, 429: 0}

    async def __call__(self, scope: dict, receive: Callable[[], Awaitable[dict]], send: Callable) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        send = self._with_headers(send)
        path = scope.get("path", "")
        if self.api_key and self.protected(path) and not keys_match(bearer_token(scope["headers"]), self.api_key):
            await self._refuse(send, 401, "invalid or missing API key (send Authorization: Bearer <key>)")
            return
        limited = self.limited(path)
        if limited and self.in_flight >= self.max_in_flight:
            await self._refuse(send, 429, f"too many requests in flight (at most {self.max_in_flight}): retry later")
            return
        if limited:  # counted from the first byte: a client that sends its body slowly holds a slot too
            self.in_flight += 1
        try:
            try:
                body = await self._read_body(scope, receive)
            except _TooLarge:
                limit = f"the request body is larger than this server accepts ({self.max_body_bytes} bytes)"
                await self._refuse(send, 413, limit)
                return
            await self.app(scope, self._replay(body, receive), send)
        finally:
            if limited:
                self.in_flight -= 1

    async def _read_body(self, scope: dict, receive: Callable[[], Awaitable[dict]]) -> list[dict]:
        """The request's body messages, read whole (bounded): a declared or actual size over the limit raises."""
        for name, value in scope["headers"]:
            if name == b"content-length" and value.isdigit() and int(value) > self.max_body_bytes:
                raise _TooLarge
        messages, size = [], 0
        while True:
            message = await receive()
            messages.append(message)
            if message["type"] != "http.request":
                return messages
            size += len(message.get("body", b""))
            if size > self.max_body_bytes:
                raise _TooLarge
            if not message.get("more_body", False):
                return messages

    @staticmethod
    def _replay(messages: list[dict], receive: Callable[[], Awaitable[dict]]) -> Callable[[], Awaitable[dict]]:
        pending = list(messages)

        async def replay() -> dict:
            return pending.pop(0) if pending else await receive()

        return replay

    def _with_headers(self, send: Callable) -> Callable:
        if not self.headers:
            return send

        async def with_headers(message: dict) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), *self.headers]}
            await send(message)

        return with_headers

    async def _refuse(self, send: Callable, status: int, message: str) -> None:
        import json

        self.refused[status] += 1
        headers = [(b"content-type", b"application/json")]
        if status == 401:
            headers.append((b"www-authenticate", b"Bearer"))
        if status == 429:
            headers.append((b"retry-after", b"1"))
        body = json.dumps(self.error_body(message, status)).encode("utf-8")
        headers.append((b"content-length", str(len(body)).encode()))
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})
