"""The app factory: `create_app(settings)` builds the FastAPI app.

Long-lived objects (storage, graph store, job runner) are made in the
lifespan and kept on ``app.state``; routes get them through
`service.api.deps`. Errors are mapped here, once: a `PlacerError` (bad input
the library caught) is a 422 naming the problem, an over-limit body a 413,
over-long headers a 431, a full disk a 507, and anything else a logged 500 (a
bug, never expected from any input).

Before any route runs, middleware refuses what can be refused without the
body: headers over ``max_header_bytes`` (431), a ``/v1`` request without a
valid key (401), a body over ``max_upload_bytes`` (413, counted as it
streams in). Bodies are then parsed off the event loop (`service.bodies`).
"""

from __future__ import annotations

import json
import logging
import math
import os
import signal
import threading
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, AsyncIterator, Callable

from fastapi import FastAPI, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from placer import __version__
from placer.errors import PlacerError
from service.api.deps import UNAUTHORIZED, tenant_for
from service.api.main import api_router
from service.api.routes import docs, health, web
from service.bodies import BodyParser, add_schemas
from service.core.config import Settings, limit_named
from service.graph_store import GraphStore
from service.jobs import JobQueueFull, JobRunner
from service.placing import warm_up
from service.sqlite_storage import open_storage
from service.storage import StorageFull
from service.uploads import PayloadTooLarge

log = logging.getLogger("placer.service")


class SafeJSONResponse(JSONResponse):
    """JSON where NaN and infinity become null (strict JSON has neither)."""

    def render(self, content: Any) -> bytes:
        content = _finite(content)
        try:
            return json.dumps(content, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode("utf-8")
        except UnicodeEncodeError:
            # A string that is not valid Unicode (a lone surrogate, stored before they were refused): JSON's
            # escapes carry it as it was stored, where UTF-8 cannot.
            return json.dumps(content, ensure_ascii=True, allow_nan=False, separators=(",", ":")).encode("ascii")


def _finite(obj: Any) -> Any:
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    return obj


class BodyLimitMiddleware:
    """413 for any request body over `max_bytes`, announced or streamed, before it is buffered."""

    def __init__(self, app: ASGIApp, max_bytes: int):
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope["headers"]).get(b"content-length", b"")
        if declared.isdigit() and int(declared) > self.max_bytes:
            await _too_large(self.max_bytes)(scope, receive, send)
            return
        received = 0

        async def limited() -> dict:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_bytes:
                    raise PayloadTooLarge(_too_large_text(self.max_bytes))
            return message

        await self.app(scope, limited, send)


class HeaderLimitMiddleware:
    """431 for a request whose request line and headers are over `max_bytes` (the server's own parser
    answers larger ones that arrive in pieces: `service.http`)."""

    def __init__(self, app: ASGIApp, max_bytes: int):
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            size = len(scope.get("raw_path") or b"") + len(scope.get("query_string") or b"") + sum(
                len(k) + len(v) + 4 for k, v in scope["headers"])
            if size > self.max_bytes:
                await JSONResponse({"detail": f"request headers are over {self.max_bytes} bytes "
                                              "(max_header_bytes)"}, status_code=431)(scope, receive, send)
                return
        await self.app(scope, receive, send)


class AuthFirstMiddleware:
    """401 for a ``/v1`` request without a valid key, before its body is read.

    FastAPI reads and parses a body before it runs a route's dependencies, the key check among them, so a
    large body without a key was parsed before its 401. The routes still check the key
    (`service.api.deps.require_api_key`), which answers the tenant.
    """

    def __init__(self, app: ASGIApp, settings: Settings):
        self.app = app
        self.settings = settings

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and self.settings.auth_enabled and (
                scope["path"] == "/v1" or scope["path"].startswith("/v1/")):
            header = dict(scope["headers"]).get(b"authorization", b"").decode("latin-1")
            if tenant_for(self.settings, header) is None:
                await JSONResponse({"detail": UNAUTHORIZED}, status_code=401,
                                   headers={"WWW-Authenticate": "Bearer"})(scope, receive, send)
                return
        await self.app(scope, receive, send)


def _too_large_text(limit: int) -> str:
    return f"request body is over {limit} bytes {limit_named('max_upload_bytes')}"


def _too_large(limit: int) -> JSONResponse:
    return JSONResponse({"detail": _too_large_text(limit)}, status_code=413)


def _add_bundled(graphs: GraphStore, folder: Path | None) -> None:
    if folder is None:
        return
    try:
        added = graphs.add_bundled(folder)
    except Exception:  # never fatal: the service runs without its examples
        log.exception("storing the bundled graphs of %s failed", folder)
        return
    if added:
        log.info("stored bundled graphs: %s", ", ".join(r.name for r in added))


def _on_stop_signal(callback: Callable[[], None]) -> None:
    """Call `callback` on SIGINT and SIGTERM, before the server's own handler.

    uvicorn's handler only starts the shutdown: it waits for open requests
    before the lifespan ends, so the app learns of the stop from the signal.
    Only where the server handles the signal (uvicorn, main thread); uvicorn
    puts its own handlers back when it returns.
    """
    if threading.current_thread() is not threading.main_thread():
        return
    for sig in (signal.SIGINT, signal.SIGTERM):
        previous = signal.getsignal(sig)
        if not callable(previous):
            continue

        def handler(signum: int, frame: Any, previous: Callable = previous) -> None:
            callback()
            previous(signum, frame)

        signal.signal(sig, handler)


def create_app(settings: Settings | None = None) -> FastAPI:
    """Build the service.

    Parameters
    ----------
    settings : configuration; by default read from ``PLACER_*`` environment variables.
    """
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")  # a GraphDef upload loads TensorFlow; keep it quiet
    settings = settings or Settings()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        storage = open_storage(settings.database_url)
        jobs = JobRunner(storage, settings)
        app.state.storage = storage
        app.state.graphs = GraphStore(storage, settings.graph_cache_size)
        app.state.jobs = jobs
        app.state.parser = BodyParser(settings.parse_workers, settings.parse_in_process_bytes)
        jobs.start()
        _on_stop_signal(jobs.close_soon)
        # Bundled graphs are stored in the background: the first start parses them, later ones only look.
        bundled = threading.Thread(target=_add_bundled, args=(app.state.graphs, settings.bundled_graphs_dir),
                                   name="placer-bundled", daemon=True)
        bundled.start()
        warming = threading.Thread(target=warm_up, name="placer-warm-up", daemon=True)
        if settings.warm_up:
            warming.start()
        try:
            yield
        finally:
            jobs.stop()
            bundled.join()
            if warming.is_alive():
                warming.join()
            app.state.parser.close()
            storage.close()

    app = FastAPI(
        title="placer",
        version=__version__,
        description="Learned device placement for TensorFlow graphs: upload a graph, get a device per op. "
                    "Every placement is scored by the same step-time simulator.",
        lifespan=lifespan,
        default_response_class=SafeJSONResponse,
        docs_url=None,  # served from the package, not a CDN (service/api/routes/docs.py)
        redoc_url=None,  # ReDoc has no offline bundle; /docs covers the same
    )
    app.state.settings = settings
    app.add_middleware(BodyLimitMiddleware, max_bytes=settings.max_upload_bytes)
    app.add_middleware(AuthFirstMiddleware, settings=settings)
    app.add_middleware(HeaderLimitMiddleware, max_bytes=settings.max_header_bytes)
    app.include_router(health.router)
    app.include_router(web.router)  # the web page at /, open like /healthz; its API calls carry the key
    app.include_router(api_router)
    docs.mount(app)
    _document_bodies(app)

    @app.exception_handler(PlacerError)
    async def _placer_error(request: Request, exc: PlacerError) -> JSONResponse:
        return SafeJSONResponse({"detail": str(exc)}, status_code=422)

    @app.exception_handler(RequestValidationError)
    async def _invalid_request(request: Request, exc: RequestValidationError) -> JSONResponse:
        # FastAPI's own handler echoes each error's whole input back (megabytes for a large inline cluster),
        # and fails with a 500 when that input is a body that is not UTF-8 (gzip posted where JSON is expected)
        return SafeJSONResponse({"detail": jsonable_encoder([_brief(e) for e in exc.errors()])},
                                status_code=422)

    @app.exception_handler(StorageFull)
    async def _storage_full(request: Request, exc: StorageFull) -> JSONResponse:
        # Not a bug (no 500): the operator must free space; the request can be sent again then.
        log.error("%s %s: %s", request.method, request.url.path, exc)
        return SafeJSONResponse({"detail": str(exc)}, status_code=507)

    @app.exception_handler(JobQueueFull)
    async def _queue_full(request: Request, exc: JobQueueFull) -> JSONResponse:
        return SafeJSONResponse({"detail": str(exc)}, status_code=429,
                                headers={"Retry-After": str(exc.retry_after)})

    @app.exception_handler(PayloadTooLarge)
    async def _payload_too_large(request: Request, exc: PayloadTooLarge) -> JSONResponse:
        return SafeJSONResponse({"detail": str(exc)}, status_code=413)

    @app.exception_handler(Exception)
    async def _bug(request: Request, exc: Exception) -> JSONResponse:
        log.exception("internal error on %s %s", request.method, request.url.path)
        return SafeJSONResponse({"detail": f"internal error: {type(exc).__name__} (see the service log)"},
                                status_code=500)

    return app


def _document_bodies(app: FastAPI) -> None:
    """Put the request models that routes parse themselves (`service.bodies`) into the OpenAPI document."""
    from service.models import JobCreate, PlacementCreate

    default = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = add_schemas(default(), [PlacementCreate, JobCreate])
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


_ECHO_CHARS = 80
"""Longest string input a validation error echoes: enough to recognise a value, never the body."""


def _brief(error: dict[str, Any]) -> dict[str, Any]:
    """A request validation error whose ``input`` is small enough to answer.

    pydantic puts the offending value in ``input``: for an inline cluster of
    100,000 devices that is the whole 14 MB list, once per error. Scalars are
    kept (strings shortened), objects and lists left out (``loc`` names them),
    and raw bytes described (a body that is not JSON).
    """
    raw = error.get("input")
    if isinstance(raw, (bytes, bytearray)):
        return {**error, "input": f"{len(raw)} bytes that are not JSON" + (
            " (gzip: post graphs to /v1/graphs)" if raw[:2] == b"\x1f\x8b" else "")}
    if isinstance(raw, str) and len(raw) > _ECHO_CHARS:
        return {**error, "input": raw[:_ECHO_CHARS] + f"... ({len(raw)} characters)"}
    if raw is None or isinstance(raw, (str, int, float, bool)):
        return error
    return {k: v for k, v in error.items() if k != "input"}
