"""The routes of the HTTP service (FastAPI); what they compute is in :mod:`.privatization`.

Imported only by :mod:`.app`, after the serve extra was checked.
"""

# no "from __future__ import annotations": FastAPI reads the route annotations at run time, and
# some refer to names local to the functions below (the privatize request, the mechanism names).
from typing import Any, Literal

from fastapi import FastAPI
from fastapi.responses import HTMLResponse, JSONResponse, Response

import deniable

from .models import CurveResponse, ErrorResponse, Health, MechanismsResponse, PrivatizeResponse
from .privatization import ON_DEVICE, ServiceState, bundle_bytes, curve_response, mechanisms_response, privatize_response

__all__ = ["ERRORS", "add_api_routes", "add_explorer_routes", "add_docs_routes", "add_page_routes"]

#: The error responses the OpenAPI spec documents.
ERRORS: dict[int | str, dict[str, Any]] = {
    400: {"model": ErrorResponse, "description": "Unreadable request body."},
    401: {"model": ErrorResponse, "description": "Missing or wrong API key."},
    413: {"model": ErrorResponse, "description": "Request body too large."},
    422: {"model": ErrorResponse, "description": "Invalid request (names the field and the problem)."},
}

# The page loads only its own files and talks only to this server.
_PAGE_HEADERS = {
    "Cache-Control": "no-cache",
    "Content-Security-Policy": "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}


def add_api_routes(app: FastAPI, state: ServiceState, request_model: Any, auth: list[Any]) -> None:
    """``/healthz``, ``GET /v1/mechanisms`` and ``POST /v1/privatize``."""
    PrivatizeRequest = request_model

    @app.get("/healthz", response_model=Health, tags=["service"], summary="Liveness (no API key needed).")
    def healthz() -> dict[str, str]:
        return {"status": "ok", "version": deniable.__version__}

    @app.get("/v1/mechanisms", response_model=MechanismsResponse, dependencies=auth, responses={401: ERRORS[401]}, tags=["privatize"], summary="Mechanisms, parameters and limits.")
    def mechanisms() -> dict[str, Any]:
        return mechanisms_response(state)

    @app.post("/v1/privatize", response_model=PrivatizeResponse, response_model_exclude_none=True, dependencies=auth, responses=ERRORS, tags=["privatize"], summary="Privatize texts word by word.")
    def privatize(req: PrivatizeRequest) -> dict[str, Any]:  # type: ignore[valid-type]
        return privatize_response(state, req)


def add_explorer_routes(app: FastAPI, state: ServiceState, auth: list[Any]) -> None:
    """``GET /v1/curves/{mechanism}`` and ``GET /v1/bundles/brr``, for the explorer page."""
    names = state.pool.names
    MechanismName = Literal[names]  # type: ignore[valid-type]

    @app.get("/v1/curves/{mechanism}", response_model=CurveResponse, dependencies=auth, responses={401: ERRORS[401], 422: ERRORS[422]}, tags=["explorer"], summary="N_w against epsilon (median and worst word).")
    def curve(mechanism: MechanismName) -> dict[str, Any]:
        return curve_response(state, mechanism)

    @app.get(
        f"/v1/bundles/{ON_DEVICE}",
        dependencies=auth,
        responses={200: {"content": {"application/octet-stream": {}}, "description": "The BRR bundle (docs/bundle_format.md)."}, 401: ERRORS[401], 422: ERRORS[422]},
        tags=["explorer"],
        summary="The BRR bundle the on-device runtime (static/brr.js) privatizes with.",
    )
    def bundle() -> Response:
        return Response(content=bundle_bytes(state), media_type="application/octet-stream", headers={"Cache-Control": "public, max-age=3600"})


def add_docs_routes(app: FastAPI, auth: list[Any]) -> None:
    """The OpenAPI spec and its Swagger UI, behind the key like the API they describe."""

    @app.get("/openapi.json", include_in_schema=False, dependencies=auth)
    def openapi_json() -> JSONResponse:
        return JSONResponse(app.openapi())

    @app.get("/docs", include_in_schema=False, dependencies=auth)
    def docs() -> HTMLResponse:
        from fastapi.openapi.docs import get_swagger_ui_html

        return get_swagger_ui_html(openapi_url="/openapi.json", title="deniable API")


def add_page_routes(app: FastAPI) -> None:
    """The ε explorer page at ``/`` and its files under ``/static`` (no key: they hold no data)."""
    from starlette.staticfiles import StaticFiles

    from ..web import static_dir

    app.mount("/static", StaticFiles(directory=str(static_dir())), name="static")

    @app.get("/", include_in_schema=False)
    def page() -> HTMLResponse:
        return HTMLResponse((static_dir() / "index.html").read_text(encoding="utf-8"), headers=_PAGE_HEADERS)
