"""``/v1/jobs/{id}/history``: a training job's curve, one row per step.

`placer train` appends one row of named scalars per step to ``history.csv``
in its output folder (`placer.rl.trainer.StepStats`); this answers those
rows, so a page opened mid-run draws the whole curve, not just the steps it
has polled. A job whose process has written no history yet has none.
"""

from __future__ import annotations

import csv
import io
import math
from pathlib import Path
from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Query, status
from pydantic import BaseModel, Field

from placer.rl.run_folder import HISTORY_FILE
from service.api.deps import StorageDep, TenantDep
from service.api.routes.graphs import ERRORS

router = APIRouter(prefix="/jobs", tags=["jobs"])


# A job's training curve.
class JobHistoryPublic(BaseModel):
    data: list[dict[str, float | None]] = Field(
        description="One row per training step, as the process wrote it (step, elapsed_seconds, "
                    "best_step_time, mean_reward, entropy...); non-numbers are null.")
    count: int


@router.get("/{job_id}/history", response_model=JobHistoryPublic, responses=ERRORS)
def get_history(
    job_id: str,
    storage: StorageDep,
    tenant: TenantDep,
    limit: Annotated[int, Query(ge=1, le=100_000, description="At most this many rows, evenly spread.")] = 2000,
) -> JobHistoryPublic:
    """Per-step training scalars of a job (empty until its process writes its first step)."""
    record = storage.get_job(job_id=job_id, tenant=tenant.owner)
    if record is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"no job with id {job_id!r}")
    rows = read_history(Path(record.job_dir) / HISTORY_FILE)
    if len(rows) > limit:  # keep the first and last steps, thin the middle evenly
        keep = (sorted({round(i * (len(rows) - 1) / (limit - 1)) for i in range(limit)}) if limit > 1
                else [len(rows) - 1])
        rows = [rows[i] for i in keep]
    return JobHistoryPublic(data=rows, count=len(rows))


def read_history(path: Path) -> list[dict[str, float | None]]:
    """Rows of a history CSV with a header; a half-written last line is dropped, a missing file is no rows."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return []
    if not text.endswith("\n"):  # the writer is mid-line
        text = text[: text.rfind("\n") + 1]
    rows = []
    reader = csv.DictReader(io.StringIO(text))
    for raw in reader:
        if None in raw or any(v is None for v in raw.values()):  # wrong number of fields
            continue
        rows.append({k: _number(v) for k, v in raw.items() if k})
    return rows


def _number(text: Any) -> float | None:
    try:
        x = float(text)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None
