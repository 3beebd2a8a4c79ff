"""Errors as JSON, the request-body limit and the API key of the HTTP service (FastAPI).

Every error is ``{"error": {"status", "code", "message", "details"}}``; user input never causes
a 500. Imported only by :mod:`.app`, after the serve extra was checked.
"""

# no "from __future__ import annotations": FastAPI reads require_key's annotations at run time.
import json
import secrets
from typing import Any

from fastapi import Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.security import APIKeyHeader, HTTPAuthorizationCredentials, HTTPBearer
from starlette.exceptions import HTTPException as StarletteHTTPException

from .config import ServiceConfig
from .errors import PoolError, ServiceError

__all__ = ["error_body", "BodyLimit", "AuthError", "auth_dependencies", "install_error_handlers"]


def error_body(status: int, code: str, message: str, details: Any = None) -> dict[str, Any]:
    return {"error": {"status": status, "code": code, "message": message, "details": details}}


class BodyLimit:
    """ASGI middleware: refuse bodies over ``max_bytes`` with a JSON 413 before anything parses
    them (checks Content-Length, then counts the bytes actually received)."""

    def __init__(self, app: Any, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def _reply(self, send: Any, status: int, code: str, message: str) -> None:
        body = json.dumps(error_body(status, code, message)).encode()
        await send({"type": "http.response.start", "status": status, "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})

    async def _declared_too_large(self, scope: Any, send: Any) -> bool:
        for name, value in scope.get("headers", ()):
            if name == b"content-length":
                if not value.isdigit():
                    await self._reply(send, 400, "bad_request", "Content-Length must be a non-negative integer")
                    return True
                if int(value) > self.max_bytes:
                    await self._reply(send, 413, "body_too_large", f"request body of {int(value)} bytes exceeds the limit of {self.max_bytes} bytes")
                    return True
        return False

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if await self._declared_too_large(scope, send):
            return
        body = bytearray()
        more = True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            body += message.get("body", b"")
            more = message.get("more_body", False)
            if len(body) > self.max_bytes:
                await self._reply(send, 413, "body_too_large", f"request body exceeds the limit of {self.max_bytes} bytes")
                return
        replayed = False

        async def replay() -> Any:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": bytes(body), "more_body": False}
            return await receive()

        await self.app(scope, replay, send)


class AuthError(Exception):
    """Missing or wrong API key (answered 401)."""


def auth_dependencies(cfg: ServiceConfig) -> list[Any]:
    """The route dependencies that check the API key (none when the server has no key)."""
    if cfg.api_key is None:
        return []
    expected = cfg.api_key.encode("utf-8")
    header_scheme = APIKeyHeader(name="X-API-Key", auto_error=False, description="The server's API key (deniable serve --api-key or $DENIABLE_API_KEY).")
    bearer_scheme = HTTPBearer(auto_error=False, description="The API key as a bearer token.")

    def require_key(key: str | None = Depends(header_scheme), bearer: HTTPAuthorizationCredentials | None = Depends(bearer_scheme)) -> None:
        given = key if key is not None else (bearer.credentials if bearer is not None else None)
        if given is None or not secrets.compare_digest(given.encode("utf-8", "surrogatepass"), expected):
            raise AuthError()

    return [Depends(require_key)]


def _validation_message(exc: RequestValidationError) -> tuple[str, list[dict[str, Any]]]:
    details = []
    for e in exc.errors():
        loc = [str(p) for p in e.get("loc", ())]
        msg = str(e.get("msg", ""))
        if e.get("type") == "literal_error" and isinstance(e.get("input"), str):  # name the unknown value
            msg += f", got {e['input'][:40]!r}"
        details.append({"loc": loc, "msg": msg, "type": str(e.get("type", ""))})
    first = details[0] if details else {"loc": [], "msg": "invalid request"}
    where = ".".join(p for p in first["loc"] if p != "body") or "body"
    return f"{where}: {first['msg']}", details


def install_error_handlers(app: FastAPI) -> None:
    """Answer every error with the JSON error shape (a 500 only for a bug, never user input)."""

    @app.exception_handler(AuthError)
    async def _auth_error(request: Request, exc: AuthError) -> JSONResponse:
        return JSONResponse(error_body(401, "unauthorized", "missing or wrong API key: send it in the X-API-Key header"), status_code=401, headers={"WWW-Authenticate": "Bearer"})

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        message, details = _validation_message(exc)
        return JSONResponse(error_body(422, "invalid_request", message, details), status_code=422)

    @app.exception_handler(PoolError)
    async def _pool_error(request: Request, exc: PoolError) -> JSONResponse:
        return JSONResponse(error_body(422, exc.code, str(exc)), status_code=422)

    @app.exception_handler(ServiceError)
    async def _service_error(request: Request, exc: ServiceError) -> JSONResponse:
        return JSONResponse(error_body(exc.status, exc.code, str(exc)), status_code=exc.status)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        code = {400: "bad_request", 404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
        return JSONResponse(error_body(exc.status_code, code, str(exc.detail)), status_code=exc.status_code, headers=getattr(exc, "headers", None))

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:  # a bug, never user input
        return JSONResponse(error_body(500, "internal_error", f"internal error ({type(exc).__name__}); see the server log"), status_code=500)
