"""The read API's ASGI app: stores, token checks, errors, metrics and logs
around the routes of ``streams.serve.routes``.

Every tenant route names its tenant in the path, and the bearer token's
tenant must be that one: 401 without a valid token, 403 (counted in
``redstring_serve_forbidden_total``) for another tenant, both decided before
anything else about the request is looked at, so that a caller without the
right token learns nothing, not even whether its parameters were valid. One
exception: a request body that is not JSON at all is refused (422) by FastAPI
before any dependency runs; that says something only about the caller's own
request. The
stores' own isolation (docs/design.md 8) still checks every record that comes
back.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Annotated, Any, Protocol

import pydantic
from fastapi import Depends, FastAPI, Path, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.exceptions import HTTPException as StarletteHTTPException

from contracts.domain import StreamPartition
from contracts.errors import (
    TRANSIENT_ERRORS,
    AliasCycleError,
    DimensionMismatchError,
    TenantIsolationError,
    is_transient,
)
from contracts.ids import TenantId
from contracts.ports.embedder import Embedder
from contracts.ports.graph import AliasStore, EntityReader, RelationshipStore
from contracts.ports.ledger import ProjectionLedger
from contracts.ports.vector import VectorReader
from streams.serve.auth import InvalidTokenError, KeySourceUnavailableError, TokenVerifier
from streams.serve.metrics import ServeMetrics
from streams.settings import Settings

log = logging.getLogger("redstring.serve")

READY_TIMEOUT_S = 2.0


class GraphReaders(EntityReader, AliasStore, RelationshipStore, ProjectionLedger, Protocol):
    """What the API reads of the graph store."""


class VectorReaders(VectorReader, ProjectionLedger, Protocol):
    """What the API reads of the vector store."""


@dataclass
class Readers:
    graph: GraphReaders
    vector: VectorReaders
    embedder: Embedder
    close: Callable[[], Awaitable[None]]


async def open_readers_from(settings: Settings) -> Readers:
    """The two stores, opened read-only (no DDL, no writes; a read-only
    database role is enough: docs/adr/0016-read-only-open.md), and the
    workers' embedder, as the settings name them."""
    from streams.wiring import open_readers

    stores = await open_readers(settings)
    return Readers(stores.graph, stores.vector, stores.embedder, stores.aclose)


@dataclass
class Context:
    """What every request reaches through ``request.app.state.context``."""

    settings: Settings
    verifier: TokenVerifier
    metrics: ServeMetrics
    readers: Readers | None = None

    def stores(self) -> Readers:
        if self.readers is None:
            raise ApiError(503, "unavailable", "the stores are not open yet")
        return self.readers


class ApiError(Exception):
    def __init__(
        self, status: int, code: str, message: str, headers: dict[str, str] | None = None
    ) -> None:
        self.status = status
        self.code = code
        self.message = message
        self.headers = headers
        super().__init__(message)


def error_response(
    status: int, code: str, message: str, headers: dict[str, str] | None = None
) -> JSONResponse:
    return JSONResponse(
        {"error": {"code": code, "message": message}}, status_code=status, headers=headers
    )


def context_of(request: Request) -> Context:
    context: Context = request.app.state.context
    return context


async def authorize(
    request: Request,
    tenant: Annotated[str, Path(description="The tenant to read; the token's tenant claim.")],
) -> TenantId:
    """The request's tenant, once its token is shown to be that tenant's."""
    context = context_of(request)
    try:
        granted = await context.verifier.tenant_of(request.headers.get("authorization"))
    except InvalidTokenError as exc:
        context.metrics.unauthorized.labels(exc.reason).inc()
        raise ApiError(
            401, "unauthorized", str(exc), {"WWW-Authenticate": 'Bearer realm="redstring"'}
        ) from None
    except KeySourceUnavailableError:
        raise ApiError(
            503, "unavailable", "the token keys cannot be read now", {"Retry-After": "5"}
        ) from None
    if granted != tenant:
        route = getattr(request.scope.get("route"), "path", "?")
        context.metrics.forbidden.labels(route).inc()
        log.warning("a token for another tenant was refused", extra={"route": route})
        raise ApiError(403, "forbidden", "this token does not grant access to this tenant")
    return granted


Tenant = Annotated[TenantId, Depends(authorize)]


def create_app(
    settings: Settings,
    *,
    readers: Readers | None = None,
    verifier: TokenVerifier | None = None,
) -> FastAPI:
    """The app. With ``readers`` it serves those (tests, benchmarks) and
    closes nothing; otherwise it opens the stores from ``settings`` at startup
    and closes them at shutdown."""
    from streams.serve.routes import router

    context = Context(
        settings=settings,
        verifier=verifier or TokenVerifier.from_settings(settings),
        metrics=ServeMetrics(),
        readers=readers,
    )

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if readers is not None:
            yield
            return
        context.readers = await open_readers_from(settings)
        log.info("stores open; serving")
        try:
            yield
        finally:
            await context.readers.close()

    app = FastAPI(
        title="redstring read API",
        version="1",
        description="Tenant-scoped reads of the projected graph and vectors. Every "
        "/v1/tenants/{tenant}/... route needs a bearer token whose tenant claim is "
        "{tenant} (docs/readers.md).",
        lifespan=lifespan,
        redoc_url=None,
        # A path with a stray trailing slash is a 404 in the API's error
        # shape, not a 307 with an empty body: every answer other than 200
        # carries {"error": ...} (docs/readers.md).
        redirect_slashes=False,
    )
    app.state.context = context
    _add_error_handlers(app)
    _add_operations(app, context)
    app.include_router(router)
    app.add_middleware(Observe, metrics=context.metrics)
    return app


def _add_error_handlers(app: FastAPI) -> None:
    async def api_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, ApiError)
        return error_response(exc.status, exc.code, exc.message, exc.headers)

    async def http_error(request: Request, exc: Exception) -> Response:
        # Starlette's own answers (no such route, method not allowed).
        assert isinstance(exc, StarletteHTTPException)
        code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "error")
        return error_response(exc.status_code, code, str(exc.detail), dict(exc.headers or {}))

    async def invalid(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, RequestValidationError)
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e.get('loc', ()))}: {e.get('msg', '')}"
            for e in exc.errors()
        )
        return error_response(422, "invalid_request", problems[:2000])

    async def value_error(request: Request, exc: Exception) -> Response:
        # The ports refuse a value they cannot hold (a wrong vector length, an
        # id or type outside the contract) with a ValueError.
        return error_response(400, "invalid_request", str(exc)[:2000])

    async def unexpected_model_error(request: Request, exc: Exception) -> Response:
        # A pydantic ValidationError is a ValueError, but one raised here was
        # not about the request (FastAPI reports those as
        # RequestValidationError): the API failed to build its own answer
        # from what a store returned. That is a server fault, not a 400.
        log.error("the API could not build its answer", exc_info=exc)
        return error_response(500, "internal", "the API could not build its answer")

    async def isolation(request: Request, exc: Exception) -> Response:
        # A store returned another tenant's record: the adapter refused to hand
        # it over (docs/adr/0013-tenant-isolation.md), and so does the API.
        log.error("tenant isolation violated", exc_info=exc)
        return error_response(500, "isolation", "the store answered outside this tenant")

    async def unavailable(request: Request, exc: Exception) -> Response:
        log.warning("a store is unavailable", extra={"error": type(exc).__name__})
        return error_response(
            503, "unavailable", "a store is unavailable; retry", {"Retry-After": "1"}
        )

    async def corrupt(request: Request, exc: Exception) -> Response:
        log.error("alias cycle in the store", exc_info=exc)
        return error_response(500, "corrupt_store", "the tenant's aliases form a cycle")

    app.add_exception_handler(ApiError, api_error)
    app.add_exception_handler(StarletteHTTPException, http_error)
    app.add_exception_handler(RequestValidationError, invalid)
    app.add_exception_handler(DimensionMismatchError, value_error)
    app.add_exception_handler(ValueError, value_error)
    app.add_exception_handler(pydantic.ValidationError, unexpected_model_error)
    app.add_exception_handler(TenantIsolationError, isolation)
    app.add_exception_handler(AliasCycleError, corrupt)
    for transient in TRANSIENT_ERRORS:
        app.add_exception_handler(transient, unavailable)


def _add_operations(app: FastAPI, context: Context) -> None:
    @app.get("/livez", include_in_schema=False)
    async def livez() -> dict[str, bool]:
        return {"live": True}

    @app.get("/readyz", include_in_schema=False)
    async def readyz() -> Response:
        if context.readers is None:
            return JSONResponse({"ready": False, "reasons": ["stores not open"]}, 503)
        reasons = []
        # A checkpoint read is one small query per store: it shows each one
        # answers, with its credentials, without touching any tenant.
        probe = StreamPartition(context.settings.topic, 0)
        for name, store in (("graph", context.readers.graph), ("vector", context.readers.vector)):
            try:
                await asyncio.wait_for(store.checkpoint(probe), READY_TIMEOUT_S)
            except Exception as exc:
                reasons.append(f"{name} store: {type(exc).__name__}")
        return JSONResponse({"ready": not reasons, "reasons": reasons}, 503 if reasons else 200)

    @app.get("/metrics", include_in_schema=False)
    async def metrics() -> Response:
        return Response(
            generate_latest(context.metrics.registry),
            headers={"Content-Type": CONTENT_TYPE_LATEST},
        )


class Observe:
    """Pure ASGI middleware: counts and times every request by route, logs
    one JSON line for it, and answers a 500 in the API's error shape for an
    exception nothing else handled (transient store errors become 503)."""

    def __init__(self, app: Any, metrics: ServeMetrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500
        responded = False

        async def observed(message: Any) -> None:
            nonlocal status, responded
            if message["type"] == "http.response.start":
                status = message["status"]
                responded = True
            await send(message)

        try:
            await self.app(scope, receive, observed)
        except Exception as exc:
            if responded:
                raise
            status, code = (503, "unavailable") if is_transient(exc) else (500, "internal")
            log.error("request failed", exc_info=exc, extra={"path": scope.get("path", "")})
            body = json.dumps({"error": {"code": code, "message": type(exc).__name__}})
            headers = [(b"content-type", b"application/json")]
            if status == 503:
                headers.append((b"retry-after", b"1"))
            await send({"type": "http.response.start", "status": status, "headers": headers})
            await send({"type": "http.response.body", "body": body.encode()})
        finally:
            elapsed = time.perf_counter() - started
            route = getattr(scope.get("route"), "path", "unmatched")
            method = scope.get("method", "")
            self.metrics.requests.labels(method, route, str(status)).inc()
            self.metrics.latency.labels(route).observe(elapsed)
            if log.isEnabledFor(logging.INFO):
                log.info(
                    "request",
                    extra={
                        "method": method,
                        "route": route,
                        "status": status,
                        "ms": round(elapsed * 1000, 2),
                    },
                )
