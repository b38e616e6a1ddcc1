"""Request errors as OpenAI's API reports them: an HTTP status and ``{"error": {"message", "type", "param", "code"}}``.

The ``openai`` client raises ``BadRequestError`` / ``NotFoundError`` / ... with the message, so a caller sees which
field was wrong and why; the server answers a bad request and keeps serving.
"""

from __future__ import annotations

from typing import Any

__all__ = ["RequestError", "error_body"]

_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    404: "not_found_error",
    405: "invalid_request_error",
    413: "invalid_request_error",
    429: "rate_limit_error",
}


class RequestError(Exception):
    """A request the server refuses: ``status`` (4xx), the message, and the offending field's name (``param``)."""

    def __init__(self, message: str, param: str | None = None, status: int = 400, code: str | None = None):
        super().__init__(message)
        self.message = message
        self.param = param
        self.status = status
        self.code = code


def error_body(message: str, status: int, param: str | None = None, code: str | None = None) -> dict[str, Any]:
    """OpenAI's error object for ``status``."""
    kind = _TYPES.get(status, "server_error" if status >= 500 else "invalid_request_error")
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}
