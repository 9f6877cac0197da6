"""``/v1/placements/{id}/trace``: a placement's simulated step as a Chrome trace.

The same trace as ``placer simulate --trace`` (`placer.trace.chrome_trace`):
open it in Perfetto or ``chrome://tracing``; the web page draws its timeline
from it. The step is simulated again on request (it is deterministic), from
the stored graph (or a training job's own copy) and the cluster spec stored
with the placement: an inline cluster that keeps a preset's name is still
that inline cluster.

``?bars=N`` answers `placer.trace.display_trace`'s form instead, what the web
page fetches: runs of ops too short to see merged into one bar each, memory
levels one per slot, every op listed in compact columns. Its size grows with
the op count by about the ops' names and a few numbers each (the table's
columns), not with the events (bench/results/SUMMARY.md: 93k ops).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

from fastapi import APIRouter, HTTPException, Query, Response, status
from fastapi.concurrency import run_in_threadpool

from placer import presets
from placer.cluster import Cluster
from placer.errors import ClusterError
from placer.graph import OpGraph
from placer.graph_io import load_graph
from placer.placement import Placement
from placer.presets import load_cluster
from placer.simulator import Simulator
from placer.trace import chrome_trace, display_trace
from service.api.deps import GraphsDep, StorageDep, TenantDep
from service.api.routes.graphs import ERRORS
from service.api.routes.placements import get_placement
from service.graph_store import GraphStore
from service.models import ErrorPublic, PlacementPublic
from service.storage import Storage

router = APIRouter(prefix="/placements", tags=["placements"])

TRACE_RESPONSES = {
    200: {"description": "The Chrome Trace Event format (JSON object form): traceEvents with ops per device "
                         "(ph X), transfers per link direction (ph X, pid 'links'), memory counters (ph C), "
                         "names (ph M); times in microseconds. otherData summarises the step.",
          "content": {"application/json": {"schema": {"type": "object"}}}},
    **ERRORS,
    409: {"model": ErrorPublic, "description": "The placement cannot be traced (no devices yet, or its "
                                               "graph or cluster was given inline and not kept)."},
    410: {"model": ErrorPublic, "description": "The placement's graph was deleted."},
}


@router.get("/{placement_id}/trace", responses=TRACE_RESPONSES, response_class=Response)
async def get_trace(
    placement_id: str, storage: StorageDep, graphs: GraphsDep, tenant: TenantDep,
    bars: Annotated[int | None, Query(
        ge=1, le=100_000,
        description="Answer the trace for display: the step cut into this many slots, runs of consecutive ops "
                    "shorter than a slot merged into one bar (category 'merged', args.count), memory levels one "
                    "per slot, every op listed in otherData.ops (columns). Left out: the full trace.")] = None,
) -> Response:
    """The placement's simulated training step as a Chrome trace (Perfetto, chrome://tracing)."""
    public = get_placement(placement_id, storage, tenant)
    if not public.devices:
        raise HTTPException(status.HTTP_409_CONFLICT,
                            f"placement {placement_id!r} has no devices yet: its training job "
                            f"{public.job_id!r} has not produced a placement; try again later")
    graph, cluster = await run_in_threadpool(_inputs, public, storage, graphs)
    trace = await run_in_threadpool(_trace, graph, cluster, public)
    if bars is not None:
        trace = await run_in_threadpool(display_trace, trace, bars)
    body = json.dumps(trace, separators=(",", ":"), allow_nan=False)
    return Response(body, media_type="application/json",
                    headers={"Content-Disposition": f'inline; filename="{placement_id}.trace.json"'})


def _inputs(public: PlacementPublic, storage: Storage, graphs: GraphStore) -> tuple[OpGraph, Cluster]:
    """The graph and cluster the placement was made for.

    The cluster is the spec stored with the placement; a placement stored
    before specs were kept falls back to its training job's copy, then to the
    preset of its name. The graph is a training job's copy (whatever the
    request sent inline), else the stored graph.
    """
    job = storage.get_job(job_id=public.job_id) if public.job_id else None
    cluster = Cluster.from_dict(public.cluster_spec) if public.cluster_spec else None
    if job is not None:
        job_dir = Path(job.job_dir)
        return load_graph(job_dir / "graph.json.gz"), cluster or load_cluster(str(job_dir / "cluster.json"))
    if public.graph_id is None:
        raise HTTPException(status.HTTP_409_CONFLICT,
                            "this placement was made from an inline graph, which the service does not keep; "
                            "upload the graph (POST /v1/graphs) and place it by graph_id to get its trace")
    graph = graphs.load(public.graph_id)
    if graph is None:
        raise HTTPException(status.HTTP_410_GONE, f"graph {public.graph_id!r} of this placement was deleted")
    if cluster is not None:
        return graph, cluster
    try:
        cluster = presets.get(public.cluster)
    except ClusterError:
        raise HTTPException(status.HTTP_409_CONFLICT,
                            f"cluster {public.cluster!r} was given inline and not kept; place on a preset "
                            "cluster (GET /v1/clusters) to get a trace") from None
    return graph, cluster


def _trace(graph: OpGraph, cluster: Cluster, public: PlacementPublic) -> dict:
    placement = Placement(graph=graph.name, cluster=cluster.name, method=public.method, devices=public.devices)
    assignment = placement.assignment(graph, cluster)
    return chrome_trace(graph, cluster, assignment, Simulator(graph, cluster).run(assignment), method=public.method)
