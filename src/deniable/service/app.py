"""The FastAPI application behind ``deniable serve``.

Routes: ``POST /v1/privatize``, ``GET /v1/mechanisms``, ``GET /v1/curves/{mechanism}`` (N_w vs
ε for the explorer's plot), ``GET /v1/bundles/brr`` (the BRR bundle for on-device use),
``GET /healthz``, ``GET /openapi.json``, ``GET /docs``, and the ε explorer page at ``/`` with its
files under ``/static``. Every error is JSON: ``{"error": {"status", "code", "message",
"details"}}``; user input never causes a 500.

A privatize response holds only what the guarantee covers (the privatized texts and the
guarantee) unless the request's ``include`` asks for input-dependent data (counts, per-word
changed flags), which must stay with the texts' owner.
"""

# no "from __future__ import annotations": FastAPI reads the route annotations of classes defined
# inside create_app at run time.
import secrets
import threading
from typing import Annotated, Any, Literal

from .._optional import import_optional
from .config import SERVICE_PARAMS, ServiceConfig
from .pool import MechanismPool, PoolError, privatize_detailed, supports_targets

__all__ = ["create_app", "INCLUDE_VALUES"]

#: What a privatize request may ask to add to its response with ``include``. All of it is
#: input-dependent (counts of unknown and changed words, per-word changed flags) and not covered
#: by the privacy guarantee: it must stay with the texts' owner (docs/service.md).
INCLUDE_VALUES = ("summary", "segments")

_DESCRIPTIONS = {
    "madlib": "Madlib: Laplace-like noise on the word vector, nearest word (metric: Euclidean distance).",
    "mahalanobis": "Mahalanobis: elliptical noise shaped by the embedding covariance (parameter lam).",
    "tem": "TEM: truncated exponential mechanism over nearby words (parameter beta).",
    "brr": "BRR: randomized response on binary word codes; runs on device from a bundle (Hamming metric).",
}


def _imports() -> None:
    for module in ("fastapi", "pydantic"):
        import_optional(module, purpose='deniable serve (pip install "deniable[serve]")')


# The page loads only its own files and talks only to this server.
_PAGE_HEADERS = {
    "Cache-Control": "no-cache",
    "Content-Security-Policy": "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}


def _error_body(status: int, code: str, message: str, details: Any = None) -> dict[str, Any]:
    return {"error": {"status": status, "code": code, "message": message, "details": details}}


class _BodyLimit:
    """ASGI middleware: refuse bodies over ``max_bytes`` with a JSON 413 before anything parses
    them (checks Content-Length, then counts the bytes actually received)."""

    def __init__(self, app: Any, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def _reply(self, send: Any, status: int, code: str, message: str) -> None:
        import json

        body = json.dumps(_error_body(status, code, message)).encode()
        await send({"type": "http.response.start", "status": status, "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.max_bytes
        for name, value in scope.get("headers", ()):
            if name == b"content-length":
                if not value.isdigit():
                    await self._reply(send, 400, "bad_request", "Content-Length must be a non-negative integer")
                    return
                if int(value) > limit:
                    await self._reply(send, 413, "body_too_large", f"request body of {int(value)} bytes exceeds the limit of {limit} bytes")
                    return
        body = bytearray()
        more = True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            body += message.get("body", b"")
            more = message.get("more_body", False)
            if len(body) > limit:
                await self._reply(send, 413, "body_too_large", f"request body exceeds the limit of {limit} bytes")
                return
        replayed = False

        async def replay() -> Any:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": bytes(body), "more_body": False}
            return await receive()

        await self.app(scope, replay, send)


def create_app(
    config: ServiceConfig | None = None,
    *,
    pool: MechanismPool | None = None,
    embedding: Any = None,
    binary_embedding: Any = None,
) -> Any:
    """Build the FastAPI app.

    Parameters
    ----------
    config
        Limits, API key and the mechanisms offered (:class:`ServiceConfig`).
    pool
        A shared :class:`MechanismPool`; by default one over ``embedding`` /
        ``binary_embedding`` (``None``: the bundled defaults).

    Returns
    -------
    fastapi.FastAPI
        The application; run it with uvicorn (``deniable serve`` does).
    """
    _imports()  # one clear install hint when the serve extra is missing
    from fastapi import Depends, FastAPI, Request
    from fastapi.exceptions import RequestValidationError
    from fastapi.responses import HTMLResponse, JSONResponse, Response
    from fastapi.security import APIKeyHeader, HTTPAuthorizationCredentials, HTTPBearer
    from pydantic import BaseModel, ConfigDict, Field, StringConstraints, field_validator, model_validator
    from starlette.exceptions import HTTPException as StarletteHTTPException

    import deniable

    cfg = config or ServiceConfig()
    pool = pool or MechanismPool(embedding, binary_embedding, mechanisms=cfg.mechanisms, max_cached=cfg.max_cached, compute_targets=cfg.compute_targets)
    names = pool.names
    if not names:
        raise ValueError("no mechanism is available to serve")
    from .curves import CurveCache

    curves = CurveCache(pool)
    work_slots = threading.BoundedSemaphore(cfg.max_concurrent)
    targets = supports_targets()
    MechanismName = Literal[names]  # type: ignore[valid-type]
    IncludeName = Literal[INCLUDE_VALUES]  # type: ignore[valid-type]

    # -- models (built here so the OpenAPI spec states this server's limits) -----------------
    Text = Annotated[str, StringConstraints(max_length=cfg.max_text_chars)]

    class Params(BaseModel):
        """Parameters a caller may set (each applies to one mechanism; others are refused)."""

        model_config = ConfigDict(extra="forbid", strict=True)

        lam: Annotated[float | None, Field(ge=0.0, le=1.0, allow_inf_nan=False)] = Field(default=None, description="mahalanobis: covariance weight λ in [0, 1].")
        beta: Annotated[float | None, Field(gt=0.0, lt=1.0, allow_inf_nan=False)] = Field(default=None, description="tem: β in (0, 1) of the truncation threshold.")

        def given(self) -> dict[str, float]:
            return {k: v for k, v in self.model_dump().items() if v is not None}

    class PrivatizeRequest(BaseModel):
        """Texts to privatize word by word with one mechanism at one ε (or privacy target)."""

        model_config = ConfigDict(extra="forbid", strict=True, json_schema_extra={"examples": [{"texts": ["Meet me at the station at noon"], "mechanism": names[0], "epsilon": 20.0}]})

        texts: list[Text] = Field(min_length=1, max_length=cfg.max_texts, description=f"1 to {cfg.max_texts} texts, each at most {cfg.max_text_chars} characters, {cfg.max_total_chars} in all.")
        mechanism: MechanismName = Field(default=names[0], description="Mechanism name (GET /v1/mechanisms).")
        epsilon: Annotated[float | None, Field(ge=cfg.min_epsilon, le=cfg.max_epsilon, allow_inf_nan=False)] = Field(
            default=None, description=f"Privacy parameter ε in [{cfg.min_epsilon:g}, {cfg.max_epsilon:g}]; give this or max_n_w."
        )
        max_n_w: Annotated[float | None, Field(gt=0.0, lt=1.0, allow_inf_nan=False)] = Field(
            default=None, description="Privacy target: the largest ε whose worst-case N_w (probability a word is kept) stays below this; needs calibration data."
        )
        params: Params = Field(default_factory=lambda: Params(), description="Mechanism parameters callers may set: " + "; ".join(f"{k}: {', '.join(v) or 'none'}" for k, v in SERVICE_PARAMS.items() if k in names) + ".")
        seed: Annotated[int | None, Field(ge=0, lt=2**63)] = Field(default=None, description="Seed for reproducible output (predictable: for experiments only)." if cfg.allow_seed else "Not accepted by this server.")
        oov: Literal["unk", "drop"] = Field(default="unk", description="Out-of-vocabulary words: privatized as the UNK point, or dropped (never copied).")
        case: Literal["preserve", "lower"] = Field(default="preserve", description="Output words take the input's case pattern, or stay lower case.")
        include: Annotated[list[IncludeName], Field(max_length=len(INCLUDE_VALUES) * 2)] = Field(
            default_factory=list,
            description="Input-dependent data to add to the response (none by default): 'summary' (the summary and per_text counts of "
            "unknown and changed words) and 'segments' (each output as pieces marking the changed words). These are not covered by "
            "the privacy guarantee (an unchanged flag next to its output word is the input word): they must stay with the texts' owner.",
        )
        details: bool = Field(default=False, description="Same as adding 'segments' to include (input-dependent; stays with the texts' owner).")

        @field_validator("texts")
        @classmethod
        def _texts(cls, v: list[str]) -> list[str]:
            total = 0
            for i, t in enumerate(v):
                try:
                    t.encode("utf-8")
                except UnicodeEncodeError:
                    raise ValueError(f"text {i} is not valid Unicode (lone surrogate)") from None
                total += len(t)
            if total > cfg.max_total_chars:
                raise ValueError(f"the texts have {total} characters in all, more than the limit of {cfg.max_total_chars}; split the batch")
            return v

        @model_validator(mode="after")
        def _one_privacy_level(self) -> "PrivatizeRequest":
            if (self.epsilon is None) == (self.max_n_w is None):
                raise ValueError("give exactly one of epsilon and max_n_w")
            if self.seed is not None and not cfg.allow_seed:
                raise ValueError("this server does not accept seeds")
            return self

        def wants(self, what: str) -> bool:
            return what in self.include or (what == "segments" and self.details)

    class GuaranteeModel(BaseModel):
        epsilon: float
        metric: str
        domain: str
        statement: str

    class TextSummary(BaseModel):
        words: int
        changed: int

    class Summary(BaseModel):
        words: int = Field(description="Words in all texts.")
        unknown: int = Field(description="Out-of-vocabulary words (privatized as UNK, or dropped).")
        changed: int = Field(description="Output words that differ from the input word.")
        changed_fraction: float = Field(description="changed / words (0 when there are no words).")

    class Segment(BaseModel):
        text: str
        word: bool
        changed: bool

    class PrivatizeResponse(BaseModel):
        """The privatized texts and their guarantee (safe to release); input-dependent fields only
        when the request's ``include`` asked for them (they must stay with the texts' owner)."""

        texts: list[str] = Field(description="The privatized texts (covered by the guarantee).")
        mechanism: str
        epsilon: float = Field(description="The ε used (chosen from the target when max_n_w was given).")
        params: dict[str, float]
        max_n_w: float | None = None
        guarantee: GuaranteeModel
        summary: Summary | None = Field(default=None, description="Only with include 'summary'. Input-dependent: stays with the texts' owner.")
        per_text: list[TextSummary] | None = Field(default=None, description="Only with include 'summary'. Input-dependent: stays with the texts' owner.")
        segments: list[list[Segment]] | None = Field(default=None, description="Only with include 'segments' (or details). Input-dependent: stays with the texts' owner.")

    class MechanismInfo(BaseModel):
        name: str
        description: str
        params: list[str]
        epsilon_range: list[float]
        suggested_epsilons: list[float]
        on_device: bool = Field(description="A bundle for the in-browser runtime is available (GET /v1/bundles/brr).")
        targets: bool = Field(description="max_n_w targets can be resolved for this mechanism (calibration data available).")

    class MechanismsResponse(BaseModel):
        mechanisms: list[MechanismInfo]
        privacy_targets: bool = Field(description="Whether this installation supports max_n_w targets at all (see each mechanism's targets).")
        limits: dict[str, float]

    class CurveResponse(BaseModel):
        mechanism: str
        params: dict[str, float]
        epsilons: list[float]
        median: list[float]
        worst: list[float]
        worst_word: list[str] | None = None
        source: str

    class ErrorDetail(BaseModel):
        status: int
        code: str
        message: str
        details: Any = None

    class ErrorResponse(BaseModel):
        error: ErrorDetail

    class Health(BaseModel):
        status: str
        version: str

    # -- authentication -----------------------------------------------------------------------
    header_scheme = APIKeyHeader(name="X-API-Key", auto_error=False, description="The server's API key (deniable serve --api-key or $DENIABLE_API_KEY).")
    bearer_scheme = HTTPBearer(auto_error=False, description="The API key as a bearer token.")

    class AuthError(Exception):
        pass

    def require_key(key: str | None = Depends(header_scheme), bearer: HTTPAuthorizationCredentials | None = Depends(bearer_scheme)) -> None:
        if cfg.api_key is None:
            return
        given = key if key is not None else (bearer.credentials if bearer is not None else None)
        if given is None or not secrets.compare_digest(given.encode("utf-8", "surrogatepass"), cfg.api_key.encode("utf-8")):
            raise AuthError()

    auth = [Depends(require_key)] if cfg.api_key is not None else []
    errors: dict[int | str, dict[str, Any]] = {
        400: {"model": ErrorResponse, "description": "Unreadable request body."},
        401: {"model": ErrorResponse, "description": "Missing or wrong API key."},
        413: {"model": ErrorResponse, "description": "Request body too large."},
        422: {"model": ErrorResponse, "description": "Invalid request (names the field and the problem)."},
    }

    app = FastAPI(
        title="deniable",
        version=deniable.__version__,
        description="Word-level metric differential privacy for text as a service. Each privatized word is sampled by the "
        "mechanism; out-of-vocabulary words are privatized as the UNK point or dropped, never copied.",
        docs_url=None,
        redoc_url=None,
        openapi_url=None,
    )
    app.state.pool = pool
    app.state.config = cfg

    # -- errors as JSON -------------------------------------------------------------------------
    @app.exception_handler(AuthError)
    async def _auth_error(request: Request, exc: AuthError) -> JSONResponse:
        return JSONResponse(_error_body(401, "unauthorized", "missing or wrong API key: send it in the X-API-Key header"), status_code=401, headers={"WWW-Authenticate": "Bearer"})

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        details = []
        for e in exc.errors():
            loc = [str(p) for p in e.get("loc", ())]
            msg = str(e.get("msg", ""))
            if e.get("type") == "literal_error" and isinstance(e.get("input"), str):  # name the unknown value
                msg += f", got {e['input'][:40]!r}"
            details.append({"loc": loc, "msg": msg, "type": str(e.get("type", ""))})
        first = details[0] if details else {"loc": [], "msg": "invalid request"}
        where = ".".join(p for p in first["loc"] if p != "body") or "body"
        return JSONResponse(_error_body(422, "invalid_request", f"{where}: {first['msg']}", details), status_code=422)

    @app.exception_handler(PoolError)
    async def _pool_error(request: Request, exc: PoolError) -> JSONResponse:
        return JSONResponse(_error_body(422, exc.code, str(exc)), status_code=422)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        code = {400: "bad_request", 404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
        return JSONResponse(_error_body(exc.status_code, code, str(exc.detail)), status_code=exc.status_code, headers=getattr(exc, "headers", None))

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:  # a bug, never user input
        return JSONResponse(_error_body(500, "internal_error", f"internal error ({type(exc).__name__}); see the server log"), status_code=500)

    # -- routes ---------------------------------------------------------------------------------
    @app.get("/healthz", response_model=Health, tags=["service"], summary="Liveness (no API key needed).")
    def healthz() -> dict[str, str]:
        return {"status": "ok", "version": deniable.__version__}

    @app.get("/v1/mechanisms", response_model=MechanismsResponse, dependencies=auth, responses={401: errors[401]}, tags=["privatize"], summary="Mechanisms, parameters and limits.")
    def mechanisms() -> dict[str, Any]:
        from .curves import DEFAULT_GRID, EPSILON_GRIDS

        items = []
        for n in names:
            grid = EPSILON_GRIDS.get(n, DEFAULT_GRID)
            items.append(
                {
                    "name": n,
                    "description": _DESCRIPTIONS.get(n, n),
                    "params": list(SERVICE_PARAMS.get(n, ())),
                    "epsilon_range": [cfg.min_epsilon, cfg.max_epsilon],
                    "suggested_epsilons": list(grid),
                    "on_device": n == "brr",
                    "targets": pool.targets_ready(n),
                }
            )
        limits = {
            "max_body_bytes": cfg.max_body_bytes,
            "max_texts": cfg.max_texts,
            "max_text_chars": cfg.max_text_chars,
            "max_total_chars": cfg.max_total_chars,
        }
        return {"mechanisms": items, "privacy_targets": targets, "limits": limits}

    @app.post("/v1/privatize", response_model=PrivatizeResponse, response_model_exclude_none=True, dependencies=auth, responses=errors, tags=["privatize"], summary="Privatize texts word by word.")
    def privatize(req: PrivatizeRequest) -> dict[str, Any]:
        params = req.params.given()
        mech = pool.get(req.mechanism, params, epsilon=req.epsilon, max_n_w=req.max_n_w)
        rng: Any = req.seed if req.seed is not None else ("secure" if cfg.secure else None)
        segments = req.wants("segments")
        # the counts come from this call's own result (privatize_detailed), never from state kept
        # on the mechanism object, which concurrent requests share
        with work_slots:
            res = privatize_detailed(mech, req.texts, rng=rng, oov=req.oov, case=req.case, segments=segments)
        g = mech.guarantee
        out: dict[str, Any] = {
            "texts": res["texts"],
            "mechanism": req.mechanism,
            "epsilon": float(mech.epsilon),
            "params": params,
            "max_n_w": req.max_n_w,
            "guarantee": {"epsilon": float(g.epsilon), "metric": g.metric, "domain": g.domain, "statement": str(g)},
        }
        if req.wants("summary"):
            words = res["words"]
            out["summary"] = {"words": words, "unknown": res["unknown"], "changed": res["changed"], "changed_fraction": (res["changed"] / words) if words else 0.0}
            out["per_text"] = res["per_text"]
        if segments:
            out["segments"] = res["segments"]
        return out

    @app.get("/v1/curves/{mechanism}", response_model=CurveResponse, dependencies=auth, responses={401: errors[401], 422: errors[422]}, tags=["explorer"], summary="N_w against epsilon (median and worst word).")
    def curve(mechanism: MechanismName) -> dict[str, Any]:
        data = curves.get(mechanism, {})
        return {k: data[k] for k in ("mechanism", "params", "epsilons", "median", "worst", "worst_word", "source") if k in data}

    bundle_lock = threading.Lock()
    bundle_cache: dict[str, bytes] = {}

    @app.get(
        "/v1/bundles/brr",
        dependencies=auth,
        responses={200: {"content": {"application/octet-stream": {}}, "description": "The BRR bundle (docs/bundle_format.md)."}, 401: errors[401], 422: errors[422]},
        tags=["explorer"],
        summary="The BRR bundle the on-device runtime (static/brr.js) privatizes with.",
    )
    def bundle() -> Response:
        if "brr" not in names:
            raise PoolError("BRR is not offered by this server", code="unavailable")
        with bundle_lock:
            if "brr" not in bundle_cache:
                bundle_cache["brr"] = _bundle_bytes(pool.binary_embedding())
            data = bundle_cache["brr"]
        return Response(content=data, media_type="application/octet-stream", headers={"Cache-Control": "public, max-age=3600"})

    # OpenAPI and docs, behind the key like the API they describe
    @app.get("/openapi.json", include_in_schema=False, dependencies=auth)
    def openapi_json() -> JSONResponse:
        return JSONResponse(app.openapi())

    @app.get("/docs", include_in_schema=False, dependencies=auth)
    def docs() -> HTMLResponse:
        from fastapi.openapi.docs import get_swagger_ui_html

        return get_swagger_ui_html(openapi_url="/openapi.json", title="deniable API")

    if cfg.page:
        from starlette.staticfiles import StaticFiles

        from ..web import static_dir

        app.mount("/static", StaticFiles(directory=str(static_dir())), name="static")

        @app.get("/", include_in_schema=False)
        def page() -> HTMLResponse:
            return HTMLResponse((static_dir() / "index.html").read_text(encoding="utf-8"), headers=_PAGE_HEADERS)

    app.add_middleware(_BodyLimit, max_bytes=cfg.max_body_bytes)
    return app


def _bundle_bytes(binary_embedding: Any) -> bytes:
    """The bundle file of ``binary_embedding`` (``BinaryEmbedding.save``), as bytes."""
    import os
    import tempfile

    fd, path = tempfile.mkstemp(suffix=".brr")
    os.close(fd)
    try:
        binary_embedding.save(path)
        with open(path, "rb") as f:
            return f.read()
    finally:
        os.unlink(path)
