"""``/v1/placements``: place a graph with a heuristic, the best of them, or a training job."""

from __future__ import annotations

import asyncio
import math
import time
from typing import Annotated, Any

from fastapi import APIRouter, Depends, HTTPException, Query, Request, Response, status
from fastapi.concurrency import run_in_threadpool
from pydantic import ValidationError

from placer.cluster import Cluster
from placer.errors import PlacerError
from placer.graph import OpGraph
from placer.placement import Placement
from service import placing
from service.api.deps import GraphsDep, JobsDep, SettingsDep, StorageDep, TenantDep, job_capacity
from service.api.routes.graphs import ERRORS, graph_for_request
from service.bodies import Parsed, parse_request, request_body
from service.core.config import Settings
from service.graph_store import new_id
from service.jobs import FINISHED, JobRunner
from service.models import ErrorPublic, PlacementCreate, PlacementPublic, PlacementsPublic, TrainOptions
from service.storage import JobRecord, PlacementRecord, Storage

router = APIRouter(prefix="/placements", tags=["placements"])


async def placement_body(request: Request) -> Parsed[PlacementCreate]:
    """The request's `PlacementCreate`, parsed and validated off the event loop (`service.bodies`)."""
    raw = await request.body()
    return await request.app.state.parser.run(parse_request, PlacementCreate, raw,
                                              request.app.state.settings.max_ops, size=len(raw))


PlacementBody = Annotated[Parsed[PlacementCreate], Depends(placement_body)]


@router.post("", status_code=status.HTTP_201_CREATED, response_model=PlacementPublic,
             responses={**ERRORS, 429: {"model": ErrorPublic, "description": "method rl: the job queue is full."},
                        202: {"model": PlacementPublic,
                                        "description": "method rl: the job has no placement yet; follow job_id."}},
             openapi_extra=request_body(PlacementCreate))
async def create_placement(parsed: PlacementBody, response: Response, settings: SettingsDep, tenant: TenantDep,
                           storage: StorageDep, graphs: GraphsDep, jobs: JobsDep) -> PlacementPublic:
    """Place a graph on a cluster; heuristics answer at once, ``rl`` with the pre-trained policy's zero-shot
    placement at once (or its job's, after at most ``wait_seconds``)."""
    body = parsed.body
    graph = await run_in_threadpool(graph_for_request, graphs, tenant.owner, graph_id=body.graph_id,
                                    graph=parsed.graph)
    cluster = placing.resolve_cluster(body.cluster if isinstance(body.cluster, str) else body.cluster.to_library())
    job: JobRecord | None = None
    steps: dict[str, float | None] | None = None
    if body.refine_seconds and body.objective != "step_time":
        raise PlacerError(f"refine_seconds refines step time, not {body.objective!r}")
    if body.method == placing.RL:
        options = _train_options(body)
        zero_shot = await run_in_threadpool(placing.zero_shot, graph, cluster, body.seed, options.steer)
        if body.baselines:
            steps = await run_in_threadpool(placing.baselines, graph, cluster, objective=body.objective,
                                            names=body.candidates, budget_seconds=settings.best_seconds)
        zero_shot = await run_in_threadpool(placing.refined, zero_shot, graph, cluster, body.refine_seconds,
                                            body.refine_sweeps)
        job = await _start_and_wait(body, options, graph, cluster, settings, storage, jobs,
                                    fine_tune=zero_shot is not None, owner=tenant.owner)
        contract = _faster(JobRunner.result(job), zero_shot.to_dict() if zero_shot else None) or _empty(graph.name,
                                                                                                        cluster.name)
    elif body.method == placing.BEST:
        if body.options:
            raise PlacerError("method 'best' runs every heuristic with its defaults and takes no options")
        best, steps = await run_in_threadpool(placing.place_best, graph, cluster, objective=body.objective,
                                              names=body.candidates, budget_seconds=settings.best_seconds)
        best = await run_in_threadpool(placing.refined, best, graph, cluster, body.refine_seconds,
                                       body.refine_sweeps)
        contract = best.to_dict()
    else:
        placement = await run_in_threadpool(placing.place_one, body.method, graph, cluster,
                                            objective=body.objective, options=body.options)
        if body.baselines:
            steps = await run_in_threadpool(placing.baselines, graph, cluster, objective=body.objective,
                                            names=body.candidates, budget_seconds=settings.best_seconds,
                                            known=placement)
        placement = await run_in_threadpool(placing.refined, placement, graph, cluster, body.refine_seconds,
                                            body.refine_sweeps)
        contract = placement.to_dict()
    record = PlacementRecord(
        id=new_id("p"), graph_id=body.graph_id, method=body.method, cluster=cluster.name,
        step_time=contract.get("step_time"), created_at=time.time(), body={**contract, "baselines": steps},
        job_id=job.id if job else None, owner=tenant.owner, cluster_spec=cluster.to_dict(),
    )
    await run_in_threadpool(storage.add_placement, record=record)
    if job is not None and not contract["devices"]:
        response.status_code = status.HTTP_202_ACCEPTED
    return _public(record, job)


def _train_options(body: PlacementCreate) -> TrainOptions:
    """method rl: the request's options as a training job's, refused before any placing is done.

    Raises
    ------
    PlacerError
        If an option is not a training job's or out of range, or the objective is not step time.
    """
    try:
        options = TrainOptions.model_validate(body.options)
    except ValidationError as e:
        raise PlacerError(f"method 'rl': bad options: {_first_error(e)} (its options: "
                          f"{', '.join(TrainOptions.model_fields)}; GET /v1/placers)") from None
    if body.objective != "step_time":
        raise PlacerError(f"method 'rl' optimises step_time only, not {body.objective!r}")
    return options


async def _start_and_wait(body: PlacementCreate, options: TrainOptions, graph: OpGraph, cluster: Cluster,
                          settings: Settings, storage: Storage, jobs: JobRunner, *, fine_tune: bool,
                          owner: str | None) -> JobRecord:
    """method rl: start a training job, then wait for it up to ``wait_seconds`` (the thread stays free), or
    until the service is told to stop.

    With `fine_tune` (the shipped policy placed the graph) the job fine-tunes that policy, as ``placer
    train`` does by default, unless the options say ``init: "none"`` or ask for what only a cold start does
    (a race of heuristic starts): it starts from the answer the user already has (steered op by op unless
    ``steer`` is false), where from scratch it takes minutes to catch up with it. Without (no zero-shot
    answer) it trains from scratch.
    """
    if options.steer and not fine_tune:  # no answer to steer: the job trains from scratch
        options = options.model_copy(update={"steer": None})
    if options.init is None:
        try:  # said in the job's options, so that they show what it does
            options = TrainOptions.model_validate({**options.flags(), "init": "shipped" if fine_tune else "none"})
        except ValidationError:
            pass  # e.g. starts > 1: the options race heuristic warm starts, which a fine-tune does not
    job_capacity(jobs)
    job = await run_in_threadpool(jobs.submit, graph=graph, cluster=cluster, graph_id=body.graph_id,
                                  budget_seconds=body.budget_seconds, seed=body.seed, options=options.flags(),
                                  owner=owner)
    deadline = time.monotonic() + min(body.wait_seconds, settings.max_wait_seconds)
    while job.state not in FINISHED and time.monotonic() < deadline and not jobs.closing.is_set():
        await asyncio.sleep(min(0.25, max(0.0, deadline - time.monotonic())))
        job = await run_in_threadpool(storage.get_job, job_id=job.id) or job
    return job


@router.get("", response_model=PlacementsPublic)
def list_placements(
    storage: StorageDep,
    tenant: TenantDep,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    offset: Annotated[int, Query(ge=0, le=2**62)] = 0,
    include_devices: Annotated[bool, Query(description="Also answer each op's device (large).")] = False,
) -> PlacementsPublic:
    """Placements made so far, oldest first, as stored (GET one to follow an rl job).

    ``devices`` is left empty unless ``include_devices=true``: a page of
    placements of 10k-op graphs would otherwise run to megabytes.
    """
    records = storage.list_placements(limit=limit, offset=offset, tenant=tenant.owner)
    if not include_devices:
        for r in records:
            r.body["devices"] = {}
            r.cluster_spec = None
    return PlacementsPublic(data=[_public(r, None) for r in records], count=len(records))


@router.get("/{placement_id}", response_model=PlacementPublic, responses=ERRORS)
def get_placement(placement_id: str, storage: StorageDep, tenant: TenantDep) -> PlacementPublic:
    """A placement made earlier; an ``rl`` placement shows its job's best placement so far, once that is
    faster than the zero-shot placement answered at first (that one has ``meta.training_steps`` 0; the
    job's has ``meta.steps`` and ``meta.found_at_step``)."""
    record = storage.get_placement(placement_id=placement_id, tenant=tenant.owner)
    if record is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"no placement with id {placement_id!r}")
    job = storage.get_job(job_id=record.job_id) if record.job_id else None
    if job is not None:
        latest = JobRunner.result(job)
        stored_is_the_jobs = "training_steps" not in (record.body.get("meta") or {})  # answered from the job
        if latest is not None and (stored_is_the_jobs or _faster(latest, record.body) is latest):
            record.body = {**latest, "baselines": record.body.get("baselines")}
            record.step_time = latest.get("step_time")
    return _public(record, job)


def _faster(job_best: dict[str, Any] | None, zero_shot: dict[str, Any] | None) -> dict[str, Any] | None:
    """The faster of a job's best placement and the zero-shot one (fitting in memory first; the zero-shot one on
    a tie).

    A short job (or a from-scratch one) can end slower than the pre-trained
    policy's instant answer; the service never answers worse than it did at first. A job that found nothing
    faster holds that answer itself (its start), so on a tie the answer keeps what the policy said of it
    (its decoding, pool member, steering), not the job's ``steps: 0``.
    """
    def key(c: dict[str, Any]) -> tuple[bool, bool, float]:
        t = c.get("step_time")
        return (not c.get("devices"), bool(c.get("oom")), t if isinstance(t, (int, float)) else math.inf)

    if job_best is None or zero_shot is None:
        return job_best or zero_shot
    return zero_shot if key(zero_shot) <= key(job_best) else job_best


def _first_error(e: ValidationError) -> str:
    err = e.errors()[0]
    return f"{'.'.join(map(str, err['loc'])) or 'options'}: {err['msg']}"


def _empty(graph: str, cluster: str) -> dict[str, Any]:
    return Placement(graph=graph, cluster=cluster, method=placing.RL, devices={}).to_dict()


def _public(record: PlacementRecord, job: JobRecord | None) -> PlacementPublic:
    """The answer for a stored placement: every field of the Placement contract, plus where it came from."""
    body = dict(record.body)
    return PlacementPublic(
        id=record.id, graph_id=record.graph_id, graph=body.get("graph", ""), cluster=record.cluster,
        method=body.get("method", record.method), devices=body.get("devices", {}),
        step_time=body.get("step_time"), peak_memory=body.get("peak_memory", {}), oom=bool(body.get("oom")),
        objective=body.get("objective", "step_time"), lower_bound=body.get("lower_bound"),
        max_load=body.get("max_load"), meta=body.get("meta", {}), baselines=body.get("baselines"),
        job_id=record.job_id, job_state=job.state if job else None, created_at=record.created_at,
        cluster_spec=record.cluster_spec,
    )
