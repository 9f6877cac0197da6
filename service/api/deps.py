"""Dependencies of the routes, as named `Annotated` aliases.

The app keeps its long-lived objects (settings, storage, graph store, job
runner) on ``app.state``; these aliases hand them to route functions as
plain typed parameters.
"""

from __future__ import annotations

import hmac
from typing import Annotated

from fastapi import Depends, HTTPException, Request, status
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from service.core.config import Settings
from service.graph_store import GraphStore
from service.jobs import JobQueueFull, JobRunner
from service.storage import Storage

_bearer = HTTPBearer(auto_error=False, description="One of PLACER_API_KEYS, when the service has keys.")


def get_settings(request: Request) -> Settings:
    return request.app.state.settings


def get_storage(request: Request) -> Storage:
    return request.app.state.storage


def get_graphs(request: Request) -> GraphStore:
    return request.app.state.graphs


def get_jobs(request: Request) -> JobRunner:
    return request.app.state.jobs


SettingsDep = Annotated[Settings, Depends(get_settings)]
StorageDep = Annotated[Storage, Depends(get_storage)]
GraphsDep = Annotated[GraphStore, Depends(get_graphs)]
JobsDep = Annotated[JobRunner, Depends(get_jobs)]


def job_capacity(jobs: JobsDep) -> None:
    """429 while the job queue is full (checked before a request starts a job)."""
    try:
        jobs.check_capacity()
    except JobQueueFull as e:
        raise HTTPException(status.HTTP_429_TOO_MANY_REQUESTS, str(e)) from None


def require_api_key(
    settings: SettingsDep,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> None:
    """401 unless the request carries ``Authorization: Bearer <key>`` with a configured key.

    No keys configured means no check (the service then binds to loopback by default).
    """
    if not settings.auth_enabled:
        return
    token = credentials.credentials if credentials is not None else ""
    # Compare against every key in constant time, so timing does not reveal a prefix.
    ok = False
    for key in settings.api_keys:
        ok |= hmac.compare_digest(token.encode(), key.encode())
    if not ok:
        raise HTTPException(
            status_code=status.HTTP_401_UNAUTHORIZED,
            detail="missing or wrong API key: send 'Authorization: Bearer <key>'",
            headers={"WWW-Authenticate": "Bearer"},
        )
