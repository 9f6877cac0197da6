"""``/healthz``: liveness, open without an API key."""

from __future__ import annotations

from fastapi import APIRouter

from placer import __version__
from service.api.deps import JobsDep, SettingsDep
from service.models import HealthPublic

router = APIRouter(tags=["health"])


@router.get("/healthz", response_model=HealthPublic)
def healthz(settings: SettingsDep, jobs: JobsDep) -> HealthPublic:
    """The service is up (and how many training processes it runs)."""
    return HealthPublic(status="ok", version=__version__, auth=settings.auth_enabled,
                        jobs_running=jobs.running_count())
