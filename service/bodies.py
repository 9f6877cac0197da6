"""Request bodies: decoded, parsed and validated off the event loop, in a bounded pool.

FastAPI parses a JSON body and validates it on the event loop: a large
inline graph held the loop, and ``/healthz`` with it. Here a
route reads the body (streamed, within ``max_upload_bytes``) and hands the
bytes to `BodyParser`, which decodes, parses and validates them:

- small bodies (``parse_in_process_bytes``) in a worker thread;
- large ones in one of ``parse_workers`` processes. JSON decoding and
  pydantic validation are single C calls that hold the interpreter lock for
  their whole length, so in a thread they stall every other request anyway.

At most ``parse_workers`` bodies are parsed at once; the others wait (their
memory is bounded by the body limit). Every problem with a body is a 422
naming it: bytes that are not UTF-8, JSON that is malformed or nested too
deep, a string that is not valid Unicode (a lone surrogate, naming the op),
a field that fails validation.
"""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import os
import threading
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from typing import Any, Callable, Generic, TypeVar

import anyio
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, ValidationError

from placer.errors import PlacerError
from placer.fileio import check_unicode, parse_json_int
from placer.graph import OpGraph
from service.uploads import PayloadTooLarge, check_op_count

_GZIP_MAGIC = b"\x1f\x8b"

Model = TypeVar("Model", bound=BaseModel)


class BodyError(PlacerError):
    """A request body is not a valid request: `errors` as FastAPI words validation errors (HTTP 422)."""

    def __init__(self, errors: list[dict[str, Any]]):
        super().__init__("; ".join(str(e.get("msg")) for e in errors))
        self.errors = errors


@dataclass
class Parsed(Generic[Model]):
    """A validated request body; an inline graph comes as the `OpGraph` it describes (validated by the
    library too), and ``body.graph`` holds only its name."""

    body: Model
    graph: OpGraph | None = None


# -- what runs in the pool ----------------------------------------------------
def decode_json(raw: bytes, where: str = "body") -> Any:
    """The JSON value of `raw`, or a `BodyError` naming what is wrong with it.

    Raises
    ------
    BodyError
        Not UTF-8 (naming the byte), not JSON (naming the position), nested deeper than the parser
        goes, or holding a string that is not valid Unicode (see `check_unicode`).
    """
    if raw[:2] == _GZIP_MAGIC:
        raise _body_error(f"{len(raw)} bytes that are not JSON (gzip: post graphs to /v1/graphs)", "json_invalid")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise _body_error(f"the {where} is not UTF-8: byte {e.start} is {raw[e.start:e.start + 1]!r}",
                          "json_invalid") from None
    try:
        value = json.loads(text, parse_int=parse_json_int)  # an integer past any float reads as infinity
    except RecursionError:
        raise _body_error(f"the {where} is JSON nested too deeply to parse", "json_invalid") from None
    except json.JSONDecodeError as e:
        raise _body_error(f"the {where} is not JSON: {e.msg} at line {e.lineno} column {e.colno}",
                          "json_invalid") from None
    problem = check_unicode(value, raw)
    if problem:
        raise _body_error(problem, "string_unicode")
    return value


def _body_error(msg: str, kind: str) -> BodyError:
    return BodyError([{"type": kind, "loc": ["body"], "msg": msg}])


def parse_request(model: type[Model], raw: bytes, max_ops: int) -> Parsed[Model]:
    """Decode, validate and (an inline graph) build a request body of `model`.

    Raises
    ------
    BodyError
        The body is not a valid `model`.
    PayloadTooLarge
        An inline graph is over `max_ops`.
    GraphError
        An inline graph the library refuses (a cycle, a dangling input: naming the op).
    """
    data = decode_json(raw)
    try:
        body = model.model_validate(data)
    except ValidationError as e:
        raise BodyError([{**err, "loc": ["body", *err["loc"]]}
                         for err in e.errors(include_url=False, include_context=False)]) from None
    spec = getattr(body, "graph", None)
    if spec is None:
        return Parsed(body)
    check_op_count({"nodes": spec.nodes}, max_ops)
    graph = OpGraph.from_dict(spec.to_library())
    return Parsed(body.model_copy(update={"graph": spec.model_copy(update={"nodes": []})}), graph)


def _in_child(fn: Callable[..., Any], *args: Any) -> tuple[str, Any]:
    """Run `fn` in a parse process; errors come back as plain values (not every exception pickles)."""
    try:
        return "ok", fn(*args)
    except BodyError as e:
        return "body", e.errors
    except PayloadTooLarge as e:
        return "large", str(e)
    except PlacerError as e:
        return "placer", str(e)


PARSE_NICENESS = 5
"""Niceness a parse process adds to the service's: parsing a large body is background work beside answering
``/healthz`` and small requests, which on a busy machine otherwise wait for a core. Set by `os.nice` as the
process's initializer, before it imports what parsing needs."""


# -- the pool ---------------------------------------------------------------
class BodyParser:
    """Parses request bodies off the event loop: at most `workers` at once, large ones in processes.

    Parameters
    ----------
    workers : bodies parsed at once (and parse processes, started when first needed).
    in_process_bytes : bodies up to this size are parsed in a thread instead.
    """

    def __init__(self, workers: int, in_process_bytes: int):
        self.workers = workers
        self.in_process_bytes = in_process_bytes
        self._limiter = anyio.CapacityLimiter(workers)
        self._pool: ProcessPoolExecutor | None = None
        self._lock = threading.Lock()

    async def run(self, fn: Callable[..., Any], *args: Any, size: int) -> Any:
        """``fn(*args)`` in a thread (a body of `size` bytes up to `in_process_bytes`) or a parse process.

        Raises
        ------
        RequestValidationError, PayloadTooLarge, PlacerError
            As `fn` raised them.
        """
        async with self._limiter:
            if size <= self.in_process_bytes:
                try:
                    return await anyio.to_thread.run_sync(fn, *args)
                except BodyError as e:
                    raise RequestValidationError(e.errors) from None
            kind, value = await self._in_process(fn, *args)
        if kind == "ok":
            return value
        if kind == "body":
            raise RequestValidationError(value)
        raise (PayloadTooLarge if kind == "large" else PlacerError)(value)

    async def _in_process(self, fn: Callable[..., Any], *args: Any) -> tuple[str, Any]:
        loop = asyncio.get_running_loop()
        pool = self._get_pool()
        try:
            return await loop.run_in_executor(pool, _in_child, fn, *args)
        except BrokenProcessPool:
            # A parse process died (out of memory?): the next body gets a fresh pool; this one fails.
            with self._lock:
                if self._pool is pool:
                    self._pool = None
            pool.shutdown(wait=False, cancel_futures=True)
            raise PayloadTooLarge("the body could not be parsed: its parse process died (out of memory?); "
                                  "send a smaller body") from None

    def _get_pool(self) -> ProcessPoolExecutor:
        with self._lock:
            if self._pool is None:
                # spawn, not fork: the service has threads (a fork copies their locks held)
                self._pool = ProcessPoolExecutor(self.workers, mp_context=multiprocessing.get_context("spawn"),
                                                 initializer=os.nice, initargs=(PARSE_NICENESS,))
            return self._pool

    def close(self) -> None:
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)


# -- OpenAPI ------------------------------------------------------------------
def request_body(model: type[BaseModel]) -> dict[str, Any]:
    """``openapi_extra`` for a route that reads a `model` body through `BodyParser` (FastAPI cannot see it)."""
    return {"requestBody": {"required": True, "content": {
        "application/json": {"schema": {"$ref": f"#/components/schemas/{model.__name__}"}}}}}


def add_schemas(openapi: dict[str, Any], models: list[type[BaseModel]]) -> dict[str, Any]:
    """Put the JSON schemas of `models` (and the models they use) into ``components.schemas``."""
    from pydantic.json_schema import models_json_schema

    _, top = models_json_schema([(m, "validation") for m in models], ref_template="#/components/schemas/{model}")
    schemas = openapi.setdefault("components", {}).setdefault("schemas", {})
    for name, schema in top.get("$defs", {}).items():
        schemas.setdefault(name, schema)
    return openapi
