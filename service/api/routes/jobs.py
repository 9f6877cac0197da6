"""``/v1/jobs``: start, follow and cancel training jobs (each a `placer train` process)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, HTTPException, Query, Request, Response, status
from fastapi.concurrency import run_in_threadpool

from service import placing
from service.api.deps import GraphsDep, JobsDep, StorageDep, TenantDep, job_capacity
from service.api.routes.graphs import ERRORS, graph_for_request
from service.bodies import Parsed, parse_request, request_body
from service.jobs import JobRunner
from service.models import ErrorPublic, JobCreate, JobProgress, JobPublic, JobsPublic, JobState
from service.storage import JobRecord

router = APIRouter(prefix="/jobs", tags=["jobs"])


def to_public(record: JobRecord, with_result: bool = True) -> JobPublic:
    """A job as answered: its record plus what its process last wrote."""
    progress = JobRunner.progress(record)
    known = JobProgress.model_fields
    return JobPublic(
        id=record.id, graph_id=record.graph_id, graph_name=record.graph_name, cluster=record.cluster,
        budget_seconds=record.budget_seconds, seed=record.seed, state=record.state, error=record.error,
        attempts=record.attempts, options=record.options, created_at=record.created_at, updated_at=record.updated_at,
        progress=_progress({k: v for k, v in progress.items() if k in known}) if progress else None,
        result=JobRunner.result(record) if with_result else None,
    )


def _progress(values: dict) -> JobProgress | None:
    """Progress as the process wrote it; fields of the wrong type are dropped, not fatal."""
    try:
        return JobProgress.model_validate(values)
    except ValueError:
        return None


async def job_body(request: Request) -> Parsed[JobCreate]:
    """The request's `JobCreate`, parsed and validated off the event loop (`service.bodies`)."""
    raw = await request.body()
    return await request.app.state.parser.run(parse_request, JobCreate, raw, request.app.state.settings.max_ops,
                                              size=len(raw))


@router.post("", status_code=status.HTTP_201_CREATED, response_model=JobPublic,
             responses={**ERRORS, 429: {"model": ErrorPublic, "description": "The job queue is full."}},
             dependencies=[Depends(job_capacity)], openapi_extra=request_body(JobCreate))
async def create_job(parsed: Annotated[Parsed[JobCreate], Depends(job_body)], tenant: TenantDep,
                     graphs: GraphsDep, jobs: JobsDep) -> JobPublic:
    """Start training a placement policy for a graph and cluster, within a time budget."""
    body = parsed.body
    graph = await run_in_threadpool(graph_for_request, graphs, tenant.owner, graph_id=body.graph_id,
                                    graph=parsed.graph)
    cluster = placing.resolve_cluster(body.cluster if isinstance(body.cluster, str) else body.cluster.to_library())
    record = await run_in_threadpool(jobs.submit, graph=graph, cluster=cluster, graph_id=body.graph_id,
                                     budget_seconds=body.budget_seconds, seed=body.seed,
                                     options=body.options.flags(), owner=tenant.owner)
    return to_public(record)


@router.get("", response_model=JobsPublic)
def list_jobs(
    storage: StorageDep,
    tenant: TenantDep,
    state: Annotated[JobState | None, Query(description="Only jobs in this state.")] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    offset: Annotated[int, Query(ge=0, le=2**62)] = 0,
    include_result: Annotated[bool, Query(description="Also answer each job's best placement (large).")] = False,
) -> JobsPublic:
    """Jobs, oldest first, with their progress (results on request: one per op each)."""
    records = storage.list_jobs(limit=limit, offset=offset, states=(state,) if state else (), tenant=tenant.owner)
    return JobsPublic(data=[to_public(r, include_result) for r in records], count=len(records))


@router.get("/{job_id}", response_model=JobPublic, responses=ERRORS)
def get_job(job_id: str, storage: StorageDep, tenant: TenantDep) -> JobPublic:
    """A job's state, progress (step, best step time, elapsed) and best placement so far."""
    record = storage.get_job(job_id=job_id, tenant=tenant.owner)
    if record is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"no job with id {job_id!r}")
    return to_public(record)


@router.delete("/{job_id}", response_model=JobPublic, responses=ERRORS)
def cancel_job(job_id: str, jobs: JobsDep, tenant: TenantDep, response: Response) -> JobPublic:
    """Cancel a job: a queued one at once, a running one after it checkpoints (state ``cancelling``).

    A finished job is answered unchanged.
    """
    record = jobs.cancel(job_id, tenant.owner)
    if record is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"no job with id {job_id!r}")
    if record.state == "cancelling":
        response.status_code = status.HTTP_202_ACCEPTED
    return to_public(record)
