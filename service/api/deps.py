"""Dependencies of the routes, as named `Annotated` aliases.

The app keeps its long-lived objects (settings, storage, graph store, job
runner) on ``app.state``; these aliases hand them to route functions as
plain typed parameters.
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, HTTPException, Request, status
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from service.bodies import BodyParser
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


def get_parser(request: Request) -> BodyParser:
    return request.app.state.parser


SettingsDep = Annotated[Settings, Depends(get_settings)]
StorageDep = Annotated[Storage, Depends(get_storage)]
GraphsDep = Annotated[GraphStore, Depends(get_graphs)]
JobsDep = Annotated[JobRunner, Depends(get_jobs)]
ParserDep = Annotated[BodyParser, Depends(get_parser)]


def job_capacity(jobs: JobsDep) -> None:
    """429 while the job queue is full (checked before a request starts a job)."""
    try:
        jobs.check_capacity()
    except JobQueueFull as e:
        raise HTTPException(status.HTTP_429_TOO_MANY_REQUESTS, str(e),
                            headers={"Retry-After": str(e.retry_after)}) from None


@dataclass(frozen=True)
class Tenant:
    """Whose request this is: what it may see, and who owns what it stores.

    ``owner`` None is the admin (the admin key, or the one tenant of a
    service without keys): it sees every row. Otherwise ``owner`` is a digest
    of the key (the database never holds a key), and the request sees and
    changes only rows with that owner.
    """

    owner: str | None

    @property
    def admin(self) -> bool:
        return self.owner is None


ADMIN = Tenant(None)
UNAUTHORIZED = "missing or wrong API key: send 'Authorization: Bearer <key>'"


def owner_of(key: str) -> str:
    """The owner id stored for a key's rows: a digest, so the database never holds a key."""
    return "k_" + hashlib.sha256(key.encode()).hexdigest()[:24]


def tenant_for(settings: Settings, authorization: str | None) -> Tenant | None:
    """The tenant an ``Authorization`` header names; None if it names none (a 401).

    Without keys there is one tenant, the admin. Every key is compared in
    constant time, so timing reveals neither a key nor which one matched.
    """
    if not settings.auth_enabled:
        return ADMIN
    scheme, _, token = (authorization or "").partition(" ")
    token = token.strip() if scheme.lower() == "bearer" else ""
    found: Tenant | None = None
    for key in settings.api_keys:
        if hmac.compare_digest(token.encode(), key.encode()) and found is None:
            found = Tenant(owner_of(key))
    if settings.admin_key and hmac.compare_digest(token.encode(), settings.admin_key.encode()):
        found = ADMIN
    return found


def require_api_key(
    request: Request,
    settings: SettingsDep,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> Tenant:
    """The request's tenant; 401 unless it carries ``Authorization: Bearer <key>`` with a configured key.

    No keys configured means no check (the service then binds to loopback, or needs ``--insecure``).
    `service.main.AuthFirstMiddleware` has already refused a bad key before the body was read; this
    answers the tenant to the routes (and puts the scheme in the OpenAPI document).
    """
    tenant = tenant_for(settings, request.headers.get("authorization"))
    if tenant is None:
        raise HTTPException(status_code=status.HTTP_401_UNAUTHORIZED, detail=UNAUTHORIZED,
                            headers={"WWW-Authenticate": "Bearer"})
    return tenant


TenantDep = Annotated[Tenant, Depends(require_api_key)]
"""The request's tenant (FastAPI runs the key check once per request, however many routes name it)."""
