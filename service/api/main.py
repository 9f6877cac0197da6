"""The ``/v1`` router: every resource, behind the API-key check."""

from fastapi import APIRouter, Depends

from service.api.deps import require_api_key
from service.api.routes import catalog, graphs, job_history, jobs, placements, traces

api_router = APIRouter(prefix="/v1", dependencies=[Depends(require_api_key)])
api_router.include_router(graphs.router)
api_router.include_router(placements.router)
api_router.include_router(jobs.router)
api_router.include_router(catalog.router)
api_router.include_router(traces.router)
api_router.include_router(job_history.router)
