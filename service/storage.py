"""Storage: graphs, placements and jobs behind one small interface, `Storage`.

The one backend is `service.sqlite_storage.SQLiteStorage`, which `service.sqlite_storage.open_storage`
opens from a database URL. Records are plain dataclasses; bodies (graphs, placements) are stored as
bytes / JSON text and parsed by the caller.

Every record has an ``owner``: the tenant (API key) that created it, or None
for the admin (the admin key, the single tenant of a service without keys,
and every row stored before tenancy existed). Reads and deletes take a
``tenant``: None sees every row (the admin), a tenant id only its own rows
(and the bundled example graphs, which everyone may read).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol


class StorageError(Exception):
    """The database URL is unusable (unknown backend, unopenable file)."""


class StorageFull(StorageError):
    """The disk (or the database's size limit) is full: nothing was stored (HTTP 507)."""


@dataclass
class GraphRecord:
    """A stored graph; `data` is its gzip-compressed JSON file form."""

    id: str
    name: str
    num_ops: int
    num_edges: int
    source: str
    created_at: float
    size_bytes: int = 0
    data: bytes | None = field(default=None, repr=False)
    owner: str | None = None
    """Tenant that stored it; None: the admin (bundled graphs, rows from before tenancy)."""


@dataclass
class PlacementRecord:
    """A stored placement answer; `body` is the Placement contract as a dict."""

    id: str
    graph_id: str | None
    method: str
    cluster: str
    step_time: float | None
    created_at: float
    body: dict[str, Any]
    job_id: str | None = None
    owner: str | None = None
    """Tenant that asked for it; None: the admin."""
    cluster_spec: dict[str, Any] | None = None
    """The cluster file form of the cluster it was placed on, inline or preset, so that every later view
    (trace, GET, web page) uses that cluster, not whatever now has its name; None in rows stored before
    it was kept (their cluster is then looked up by name)."""


@dataclass
class JobRecord:
    """A training job. `state` is the service's view: queued, running, done,
    interrupted, failed or cancelled. `resume` asks the next start to continue
    from the job's checkpoint."""

    id: str
    graph_id: str | None
    graph_name: str
    cluster: str
    budget_seconds: float
    seed: int
    state: str
    job_dir: str
    created_at: float
    updated_at: float
    pid: int | None = None
    error: str | None = None
    resume: bool = False
    attempts: int = 0
    options: dict[str, Any] = field(default_factory=dict)
    """Trainer options (steps, samples, groups, warm_start), passed as ``placer train`` flags."""
    retries: int = 0
    """Times the service resumed the job after its process was killed from outside (`service.jobs.MAX_RETRIES`)."""
    owner: str | None = None
    """Tenant that started it; None: the admin."""


class Storage(Protocol):
    """What the service needs from a database; every method is thread-safe.

    `tenant` narrows a read or delete to one tenant's rows; None (the default) is the admin's view, every row.
    """

    def add_graph(self, *, record: GraphRecord) -> None: ...
    def get_graph(self, *, graph_id: str, with_data: bool = False, tenant: str | None = None
                  ) -> GraphRecord | None: ...
    def list_graphs(self, *, limit: int, offset: int, tenant: str | None = None) -> list[GraphRecord]: ...
    def bundled_sources(self) -> set[str]: ...
    def add_bundled_graph(self, *, record: GraphRecord) -> bool: ...
    def delete_graph(self, *, graph_id: str, tenant: str | None = None) -> bool: ...
    def add_placement(self, *, record: PlacementRecord) -> None: ...
    def get_placement(self, *, placement_id: str, tenant: str | None = None) -> PlacementRecord | None: ...
    def list_placements(self, *, limit: int, offset: int, tenant: str | None = None) -> list[PlacementRecord]: ...
    def add_job(self, *, record: JobRecord, max_queued: int | None = None) -> bool: ...
    def get_job(self, *, job_id: str, tenant: str | None = None) -> JobRecord | None: ...
    def list_jobs(self, *, limit: int, offset: int, states: tuple[str, ...] = (),
                  tenant: str | None = None) -> list[JobRecord]: ...
    def update_job(self, *, job_id: str, if_state: tuple[str, ...] = (), **changes: Any) -> JobRecord | None: ...
    def close(self) -> None: ...
