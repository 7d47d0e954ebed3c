"""HTTP errors: what a request got wrong, answered as an OpenAI-style JSON error body.

Every 4xx and 5xx the server answers itself has the shape the OpenAI SDKs parse,
``{"error": {"message", "type", "param", "code"}}``, so a client sees the message
whichever protocol route it called.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from selectgraph.core._errors import SelectGraphError
from selectgraph.serve._turns import ServeError

__all__ = ["ApiError", "error_body", "error_response", "handle_api_error", "handle_serve_error"]

_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    404: "not_found_error",
    405: "invalid_request_error",
    409: "conflict_error",
    413: "invalid_request_error",
    422: "invalid_request_error",
}
_CODES = {409: "thread_busy", 413: "request_too_large", 401: "invalid_token"}


class ApiError(SelectGraphError):
    """A request the server refuses: its HTTP status, and what was wrong where."""

    def __init__(
        self, status: int, message: str, *, param: str | None = None, code: str | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        """The HTTP status to answer with."""
        self.message = message
        """What was wrong."""
        self.param = param
        """The request field at fault, when one is (``messages[1].content``)."""
        self.code = code
        """A machine-readable reason (``model_not_found``), when there is one."""


def error_body(
    status: int, message: str, *, param: str | None = None, code: str | None = None
) -> dict[str, Any]:
    """The JSON error for ``status``: what OpenAI's clients read as the error's message."""
    kind = _TYPES.get(status, "server_error" if status >= 500 else "invalid_request_error")
    return {
        "error": {
            "message": message,
            "type": kind,
            "param": param,
            "code": code if code is not None else _CODES.get(status),
        }
    }


def error_response(
    status: int,
    message: str,
    *,
    param: str | None = None,
    code: str | None = None,
    headers: dict[str, str] | None = None,
) -> JSONResponse:
    """The JSON error response for ``status``."""
    body = error_body(status, message, param=param, code=code)
    return JSONResponse(body, status_code=status, headers=headers)


async def handle_api_error(request: Request, exc: Exception) -> Response:
    """Starlette's handler for :class:`ApiError`."""
    assert isinstance(exc, ApiError)
    return error_response(exc.status, exc.message, param=exc.param, code=exc.code)


async def handle_serve_error(request: Request, exc: Exception) -> Response:
    """Starlette's handler for a :class:`ServeError` a handler let through."""
    assert isinstance(exc, ServeError)
    return error_response(exc.status, exc.message)
