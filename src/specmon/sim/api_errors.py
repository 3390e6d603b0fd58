"""vLLM's error answers: the HTTP status and the `{"error": {...}}` body of its ErrorResponse.

Pure (no I/O). Wording and types follow vLLM 0.32 and the golden captures (tests/golden/http).
"""

from __future__ import annotations

from http import HTTPStatus

from specmon.sim.jsonwire import dumps


class ApiError(Exception):
    """An error answer: HTTP status and vLLM's error body."""

    def __init__(
        self, status: int, message: str, err_type: str | None = None, param: str | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.err_type = err_type or error_type(status)
        self.param = param

    def body(self) -> bytes:
        return error_body(self.status, self.message, self.err_type, self.param)


def validation_error(kind: str, loc: str, msg: str, items: int, ctx: str | None = None) -> ApiError:
    """A request-validation error as vLLM 0.32 words it (type "Bad Request", param = loc)."""
    detail = (
        f"{{'type': '{kind}', 'loc': '{loc}', 'msg': '{msg}', 'input': '<dict of {items} items>'"
    )
    if ctx is not None:
        detail += f", 'ctx': {{'error': '{ctx}'}}"
    return ApiError(400, f"1 validation error:\n  {detail}}}", "Bad Request", loc)


def error_type(status: int) -> str:
    """vLLM's error `type` for a status: BadRequestError, NotFoundError, InternalServerError…"""
    named = {
        400: "BadRequestError",
        401: "AuthenticationError",
        404: "NotFoundError",
        422: "UnprocessableEntityError",
        500: "InternalServerError",
    }
    if status in named:
        return named[status]
    phrase = HTTPStatus(status).phrase.title().replace(" ", "").replace("-", "")
    return phrase if phrase.endswith("Error") else phrase + "Error"


def error_body(
    status: int, message: str, err_type: str | None = None, param: str | None = None
) -> bytes:
    """`{"error": {"message", "type", "param", "code"}}` as vLLM's ErrorResponse."""
    return dumps(
        {
            "error": {
                "message": message,
                "type": err_type or error_type(status),
                "param": param,
                "code": status,
            }
        }
    ).encode()
