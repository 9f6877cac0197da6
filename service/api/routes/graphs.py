"""``/v1/graphs``: upload (JSON, gzip JSON, TensorFlow GraphDef, zipped SavedModel, .keras), list, fetch,
delete."""

from __future__ import annotations

import functools
import gzip
import json
from typing import Annotated

from fastapi import APIRouter, HTTPException, Query, Request, Response, status
from fastapi.concurrency import run_in_threadpool

from placer.graph import OpGraph
from service.api.deps import GraphsDep, ParserDep, StorageDep, TenantDep
from service.graph_store import GraphStore
from service.models import ErrorPublic, GraphPublic, GraphsPublic
from service.storage import GraphRecord
from service.uploads import UploadFormat, upload_record

router = APIRouter(prefix="/graphs", tags=["graphs"])
MAX_FETCHES = 1000
"""Most ``fetch`` parameters one upload takes (each becomes an argument of the import process)."""

_BINARY = {"schema": {"type": "string", "format": "binary"}}
UPLOAD_BODY = {
    "requestBody": {
        "required": True,
        "description": "A graph in the JSON graph format (plain or gzip-compressed), a TensorFlow "
                       "GraphDef (binary protobuf or text format), a SavedModel folder as a zip archive, or a "
                       ".keras file.",
        "content": {
            "application/json": {"schema": {"$ref": "#/components/schemas/GraphSpec"}},
            "application/gzip": _BINARY,
            "application/zip": _BINARY,
            "application/octet-stream": _BINARY,
            "text/plain": {"schema": {"type": "string"}},
        },
    }
}
ERRORS = {
    404: {"model": ErrorPublic, "description": "No such id (or not this key's)."},
    413: {"model": ErrorPublic, "description": "Over max_upload_bytes, max_inflated_bytes or max_ops."},
    422: {"model": ErrorPublic, "description": "Malformed input, naming the problem."},
}


def to_public(record: GraphRecord, graph: dict | None = None) -> GraphPublic:
    return GraphPublic(
        id=record.id, name=record.name, num_ops=record.num_ops, num_edges=record.num_edges,
        source=record.source, size_bytes=record.size_bytes, created_at=record.created_at, graph=graph,
    )


def graph_for_request(graphs: GraphStore, tenant: str | None, *, graph_id: str | None,
                      graph: OpGraph | None) -> OpGraph:
    """The graph a placement or job request names: a stored one the tenant may read (404 otherwise) or the
    inline one (already built by `service.bodies.parse_request`).

    Raises
    ------
    HTTPException
        404 when `graph_id` names no graph the tenant may read.
    """
    if graph_id is not None:
        found = graphs.load(graph_id, tenant)
        if found is None:
            raise HTTPException(status.HTTP_404_NOT_FOUND, f"no graph with id {graph_id!r}")
        return found
    assert graph is not None  # the request model requires one of the two
    return graph


@router.post("", status_code=status.HTTP_201_CREATED, response_model=GraphPublic,
             openapi_extra=UPLOAD_BODY, responses=ERRORS)
async def upload_graph(
    request: Request,
    tenant: TenantDep,
    parser: ParserDep,
    graphs: GraphsDep,
    name: Annotated[str | None, Query(min_length=1, max_length=200, description="Name for the graph.")] = None,
    format: Annotated[UploadFormat, Query(description="Body format; auto tells JSON from GraphDef, and a zipped "
                                                      "SavedModel from a .keras file.")] = "auto",
    fetch: Annotated[list[str] | None, Query(
        max_length=MAX_FETCHES,
        description="GraphDef only, repeatable: a node one training step runs (a session's fetch or "
                    "target, e.g. the train op or loss:0). Nodes no fetch needs, such as variable "
                    "initializers, are left out, as a session leaves them out of the step. Without it, every "
                    "node is kept: a bare GraphDef does not say what a step runs.")] = None,
    batch: Annotated[int | None, Query(
        ge=1, le=2**31 - 1,
        description="GraphDef and SavedModel: the batch size, for placeholders whose first dimension is unknown "
                    "(as 'placer import --batch'); .keras: the training step's batch size (required).")] = None,
    unknown_dim: Annotated[int | None, Query(
        ge=1, le=2**31 - 1,
        description="GraphDef and SavedModel: the estimate for dimensions no input shape fixes (data-dependent "
                    "ones), recorded in the graph's meta (as 'placer import --unknown-dim'); without it such a "
                    "dimension is a 422.")] = None,
    signature: Annotated[str | None, Query(
        min_length=1, max_length=200,
        description="SavedModel only: the signature to import (default serving_default).")] = None,
    loss: Annotated[str | None, Query(
        min_length=1, max_length=200,
        description=".keras only: the Keras loss of the training step (default: the compiled one).")] = None,
    optimizer: Annotated[str | None, Query(
        min_length=1, max_length=200,
        description=".keras only: the Keras optimizer of the training step (default: the compiled one).")] = None,
) -> GraphPublic:
    """Upload a graph; answers its id, name and size."""
    settings = request.app.state.settings
    body = await request.body()
    parse = functools.partial(
        upload_record, body, owner=tenant.owner, keep_graph=len(body) <= parser.in_process_bytes, fmt=format,
        name=name, content_type=request.headers.get("content-type", ""), max_inflated=settings.max_inflated_bytes,
        max_ops=settings.max_ops, fetches=fetch, batch=batch, signature=signature, loss=loss, optimizer=optimizer,
        unknown_dim=unknown_dim,
    )
    record, graph = await parser.run(parse, size=len(body))
    await run_in_threadpool(graphs.add_record, record, graph)
    return to_public(record)


@router.get("", response_model=GraphsPublic)
def list_graphs(
    storage: StorageDep,
    tenant: TenantDep,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    offset: Annotated[int, Query(ge=0, le=2**62)] = 0,
) -> GraphsPublic:
    """Stored graphs the key may read (its own and the bundled examples), oldest first."""
    records = storage.list_graphs(limit=limit, offset=offset, tenant=tenant.owner)
    return GraphsPublic(data=[to_public(r) for r in records], count=len(records))


@router.get("/{graph_id}", response_model=GraphPublic, responses=ERRORS)
def get_graph(
    graph_id: str,
    storage: StorageDep,
    tenant: TenantDep,
    include_graph: Annotated[bool, Query(description="Also answer the graph itself.")] = False,
) -> GraphPublic:
    """One stored graph's summary (and the graph, when asked)."""
    record = storage.get_graph(graph_id=graph_id, with_data=include_graph, tenant=tenant.owner)
    if record is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"no graph with id {graph_id!r}")
    graph = json.loads(gzip.decompress(record.data)) if include_graph and record.data else None
    return to_public(record, graph)


@router.delete("/{graph_id}", status_code=status.HTTP_204_NO_CONTENT, response_class=Response,
               responses=ERRORS)
def delete_graph(graph_id: str, graphs: GraphsDep, tenant: TenantDep) -> Response:
    """Delete a stored graph the key owns (placements and jobs made from it keep their copies); a bundled
    example graph only the admin key deletes (403)."""
    if graphs.delete(graph_id, tenant.owner):
        return Response(status_code=status.HTTP_204_NO_CONTENT)
    if graphs.storage.get_graph(graph_id=graph_id, tenant=tenant.owner) is not None:
        raise HTTPException(status.HTTP_403_FORBIDDEN,
                            f"graph {graph_id!r} is a bundled example every key reads; only the admin key deletes it")
    raise HTTPException(status.HTTP_404_NOT_FOUND, f"no graph with id {graph_id!r}")
