"""`service.storage.Storage` in SQLite, through the standard library, and `open_storage`, which opens it
from a database URL.

The embedded default: one file in the data directory, WAL journal,
``synchronous=FULL``, so a row the service answered for is on disk before
the answer leaves and survives a crash or restart. A tenant's reads and
deletes are filtered in the SQL statement, so no caller can forget it after
the fact.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
from contextlib import contextmanager
from dataclasses import asdict, fields
from pathlib import Path
from typing import Any, Iterator
from urllib.parse import unquote, urlparse

from service.storage import GraphRecord, JobRecord, PlacementRecord, Storage, StorageError, StorageFull


_SCHEMA = """
CREATE TABLE IF NOT EXISTS graphs (
    id TEXT PRIMARY KEY, name TEXT NOT NULL, num_ops INTEGER NOT NULL, num_edges INTEGER NOT NULL,
    source TEXT NOT NULL, created_at REAL NOT NULL, size_bytes INTEGER NOT NULL, data BLOB NOT NULL,
    owner TEXT
);
CREATE TABLE IF NOT EXISTS placements (
    id TEXT PRIMARY KEY, graph_id TEXT, method TEXT NOT NULL, cluster TEXT NOT NULL,
    step_time REAL, created_at REAL NOT NULL, body TEXT NOT NULL, job_id TEXT, owner TEXT, cluster_spec TEXT
);
CREATE TABLE IF NOT EXISTS jobs (
    id TEXT PRIMARY KEY, graph_id TEXT, graph_name TEXT NOT NULL, cluster TEXT NOT NULL,
    budget_seconds REAL NOT NULL, seed INTEGER NOT NULL, state TEXT NOT NULL, job_dir TEXT NOT NULL,
    created_at REAL NOT NULL, updated_at REAL NOT NULL, pid INTEGER, error TEXT,
    resume INTEGER NOT NULL DEFAULT 0, attempts INTEGER NOT NULL DEFAULT 0,
    options TEXT NOT NULL DEFAULT '{}', retries INTEGER NOT NULL DEFAULT 0, owner TEXT
);
CREATE INDEX IF NOT EXISTS jobs_state ON jobs(state);
CREATE TABLE IF NOT EXISTS bundled_graphs (
    source TEXT PRIMARY KEY, graph_id TEXT NOT NULL, stored_at REAL NOT NULL
);
"""

_GRAPH_META = "id, name, num_ops, num_edges, source, created_at, size_bytes, owner"
_PLACEMENT_COLUMNS = "id, graph_id, method, cluster, step_time, created_at, body, job_id, owner, cluster_spec"
_NEW_COLUMNS = {
    "graphs": (("owner", "TEXT"),),
    "placements": (("owner", "TEXT"), ("cluster_spec", "TEXT")),
    "jobs": (("options", "TEXT NOT NULL DEFAULT '{}'"), ("retries", "INTEGER NOT NULL DEFAULT 0"), ("owner", "TEXT")),
}
"""Columns added since the first version, which `_migrate` adds to an older file (an owner of NULL: the admin's)."""
_JOB_FIELDS = [f.name for f in fields(JobRecord)]


_BUSY_SECONDS = 30.0
"""How long a statement waits for another process's lock on the database before giving up."""
_RESERVE_BYTES = 8 * 2**20
"""Disk space the storage keeps in a file beside the database and gives back when the disk is full, so that
a DELETE (a write, in WAL mode) can still run and free space."""


class SQLiteStorage:
    """`Storage` in one SQLite file (or ``:memory:``).

    One connection for writes guarded by a lock: SQLite serialises writers
    anyway, and the service's transactions are a single statement each (but
    storing a bundled graph, `add_bundled_graph`). Reads go through a second
    connection with a lock of its own: in WAL mode they see every committed
    write and need not wait for one in progress (``/healthz`` waited on the
    lock for as long as a large upload took to reach the disk). Several
    processes may share the file (WAL, busy timeout).
    """

    def __init__(self, path: str):
        self.path = path
        self._reserve = None if path == ":memory:" else Path(path + ".reserve")
        if path != ":memory:":
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        try:
            self._db = sqlite3.connect(path, check_same_thread=False, timeout=_BUSY_SECONDS, isolation_level=None)
            # A new file gives the pages of deleted rows back to the file system (`_deleting`); an older
            # file keeps them for its next rows (setting this takes effect only before the first table).
            self._db.execute("PRAGMA auto_vacuum=INCREMENTAL")
            self._use_wal()
            self._db.execute("PRAGMA synchronous=FULL")
            had_bundled = self._has_table("bundled_graphs")
            self._db.executescript(_SCHEMA)
            self._migrate(had_bundled)
        except sqlite3.Error as e:
            raise StorageError(f"cannot open SQLite database {path!r}: {e}") from None
        self._lock = threading.Lock()
        self._read_lock = threading.Lock()
        self._reader = self._db if path == ":memory:" else sqlite3.connect(
            path, check_same_thread=False, timeout=_BUSY_SECONDS, isolation_level=None)
        if self._reader is self._db:  # one in-memory database: one connection, one lock
            self._read_lock = self._lock
        self._make_reserve()

    def _make_reserve(self) -> None:
        """Fill the reserve file up to `_RESERVE_BYTES` where there is room (never fatal: without room, a
        delete on a full disk finds none to give back)."""
        if self._reserve is None:
            return
        try:
            if self._reserve.exists() and self._reserve.stat().st_size >= _RESERVE_BYTES:
                return
            with open(self._reserve, "wb") as f:
                os.posix_fallocate(f.fileno(), 0, _RESERVE_BYTES)
        except OSError:
            self._reserve.unlink(missing_ok=True)

    def _release_reserve(self) -> bool:
        """Give the reserve file's space back to the file system; False if there was none."""
        if self._reserve is None or not self._reserve.exists():
            return False
        self._reserve.unlink(missing_ok=True)
        return True

    def _use_wal(self) -> None:
        """Switch the file to WAL, retrying while another process opens it too: the switch needs the file to
        itself, and SQLite answers "database is locked" at once there, without waiting its busy timeout
        (``placer serve --workers N`` on a fresh data dir failed to start a worker that way)."""
        deadline = time.monotonic() + _BUSY_SECONDS
        while True:
            try:
                self._db.execute("PRAGMA journal_mode=WAL")
                return
            except sqlite3.OperationalError as e:
                if "locked" not in str(e) or time.monotonic() > deadline:
                    raise
                time.sleep(0.02)

    def _has_table(self, name: str) -> bool:
        return self._db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?",
                                (name,)).fetchone() is not None

    def _migrate(self, had_bundled: bool) -> None:
        """Bring a file made by an older version up to date (its data keeps working).

        Tables gain the columns of `_NEW_COLUMNS`: rows stored before tenancy have no owner, so they
        belong to the admin. Bundled graphs an older version stored are recorded as stored, so they are
        not stored again.
        """
        for table, columns in _NEW_COLUMNS.items():
            have = {row[1] for row in self._db.execute(f"PRAGMA table_info({table})")}
            for column, kind in columns:
                if column in have:
                    continue
                try:
                    self._db.execute(f"ALTER TABLE {table} ADD COLUMN {column} {kind}")
                except sqlite3.OperationalError as e:  # another worker, opening the file too, added it first
                    if "duplicate column" not in str(e):
                        raise
        if not had_bundled:
            self._db.execute("INSERT OR IGNORE INTO bundled_graphs SELECT source, id, created_at FROM graphs "
                             "WHERE source LIKE 'bundled:%' ORDER BY created_at")

    @contextmanager
    def _writing(self) -> Iterator[sqlite3.Connection]:
        """The connection, under the lock; SQLite's "database or disk is full" raised as `StorageFull`
        (other errors are bugs, a 500)."""
        with self._lock:
            try:
                yield self._db
            except sqlite3.Error as e:
                if e.sqlite_errorcode != sqlite3.SQLITE_FULL:
                    raise
                raise StorageFull(f"the service's disk is full ({e}); the request changed nothing") from None

    def _run(self, sql: str, params: tuple = ()) -> sqlite3.Cursor:
        with self._writing() as db:
            return db.execute(sql, params)

    def _rows(self, sql: str, params: tuple = ()) -> list[tuple]:
        with self._read_lock:
            return self._reader.execute(sql, params).fetchall()

    # -- graphs ----------------------------------------------------------
    def add_graph(self, *, record: GraphRecord) -> None:
        with self._writing():
            self._insert_graph(record)

    def _insert_graph(self, record: GraphRecord) -> None:
        """Insert one graph row; the caller holds the lock."""
        if record.data is None:
            raise ValueError("a graph record needs its data")
        self._db.execute(
            f"INSERT INTO graphs ({_GRAPH_META}, data) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (record.id, record.name, record.num_ops, record.num_edges, record.source,
             record.created_at, record.size_bytes, record.owner, record.data),
        )

    def get_graph(self, *, graph_id: str, with_data: bool = False, tenant: str | None = None
                  ) -> GraphRecord | None:
        cols = _GRAPH_META + (", data" if with_data else "")
        where, params = _readable_graphs(tenant)
        rows = self._rows(f"SELECT {cols} FROM graphs WHERE id = ?{where}", (graph_id, *params))
        return _graph(rows[0]) if rows else None

    def list_graphs(self, *, limit: int, offset: int, tenant: str | None = None) -> list[GraphRecord]:
        where, params = _readable_graphs(tenant)
        rows = self._rows(
            f"SELECT {_GRAPH_META} FROM graphs WHERE 1{where} ORDER BY created_at, id LIMIT ? OFFSET ?",
            (*params, limit, offset),
        )
        return [_graph(r) for r in rows]

    def bundled_sources(self) -> set[str]:
        """Sources of every bundled graph ever stored, deleted ones included (see `add_bundled_graph`)."""
        return {row[0] for row in self._rows("SELECT source FROM bundled_graphs")}

    def add_bundled_graph(self, *, record: GraphRecord) -> bool:
        """Store a bundled graph unless one from ``record.source`` was ever stored; True if stored.

        The source is recorded for good, so a bundled graph a user deleted is
        not stored again at the next start. Recording and storing are one
        write transaction (``BEGIN IMMEDIATE``) keyed on the source: service
        processes starting together on one database store each file once.
        """
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                fresh = self._db.execute("INSERT OR IGNORE INTO bundled_graphs VALUES (?, ?, ?)",
                                         (record.source, record.id, record.created_at)).rowcount == 1
                if fresh:
                    self._insert_graph(record)
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
        return fresh

    def delete_graph(self, *, graph_id: str, tenant: str | None = None) -> bool:
        """Delete a graph the tenant owns (the admin: any); True if one was deleted."""
        where, params = _owned(tenant)
        return self._deleting(f"DELETE FROM graphs WHERE id = ?{where}", (graph_id, *params)) > 0

    def _deleting(self, sql: str, params: tuple) -> int:
        """Run a DELETE, even on a full disk; the number of rows deleted.

        In WAL mode a delete is a write like any other: with the disk full it
        failed (507), so space could not be freed through the API. Where the
        disk is full, the reserve file (`_RESERVE_BYTES`, made when the database is opened) is given back to
        make room for the delete, and the freed pages are returned to the file system
        (``incremental_vacuum``, then a WAL checkpoint).
        """
        try:
            return self._run(sql, params).rowcount
        except StorageFull:
            if not self._release_reserve():
                raise
        deleted = self._run(sql, params).rowcount
        with self._lock:
            try:
                self._db.execute("PRAGMA incremental_vacuum")
                self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            except sqlite3.Error:  # the rows are deleted; giving pages back is a bonus
                pass
        self._make_reserve()
        return deleted

    # -- placements ------------------------------------------------------
    def add_placement(self, *, record: PlacementRecord) -> None:
        self._run(
            f"INSERT INTO placements ({_PLACEMENT_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (record.id, record.graph_id, record.method, record.cluster, record.step_time,
             record.created_at, json.dumps(record.body), record.job_id, record.owner,
             None if record.cluster_spec is None else json.dumps(record.cluster_spec)),
        )

    def get_placement(self, *, placement_id: str, tenant: str | None = None) -> PlacementRecord | None:
        where, params = _owned(tenant)
        rows = self._rows(f"SELECT {_PLACEMENT_COLUMNS} FROM placements WHERE id = ?{where}",
                          (placement_id, *params))
        return _placement(rows[0]) if rows else None

    def list_placements(self, *, limit: int, offset: int, tenant: str | None = None) -> list[PlacementRecord]:
        where, params = _owned(tenant)
        rows = self._rows(f"SELECT {_PLACEMENT_COLUMNS} FROM placements WHERE 1{where} "
                          "ORDER BY created_at, id LIMIT ? OFFSET ?", (*params, limit, offset))
        return [_placement(r) for r in rows]

    # -- jobs ------------------------------------------------------------
    def add_job(self, *, record: JobRecord, max_queued: int | None = None) -> bool:
        """Insert a job; with `max_queued`, only while fewer jobs are queued (False, nothing stored,
        otherwise). The count and the insert are one statement, so service processes adding jobs at the
        same moment cannot together pass the limit, as a count read before the insert let them."""
        values = asdict(record)
        values["resume"] = int(values["resume"])
        values["options"] = json.dumps(values["options"])
        marks = ", ".join("?" for _ in _JOB_FIELDS)
        params = tuple(values[k] for k in _JOB_FIELDS)
        if max_queued is None:
            sql = f"INSERT INTO jobs ({', '.join(_JOB_FIELDS)}) VALUES ({marks})"
        else:
            sql = (f"INSERT INTO jobs ({', '.join(_JOB_FIELDS)}) SELECT {marks} "
                   "WHERE (SELECT COUNT(*) FROM jobs WHERE state = 'queued') < ?")
            params += (max_queued,)
        return self._run(sql, params).rowcount == 1

    def get_job(self, *, job_id: str, tenant: str | None = None) -> JobRecord | None:
        where, params = _owned(tenant)
        rows = self._rows(f"SELECT {', '.join(_JOB_FIELDS)} FROM jobs WHERE id = ?{where}", (job_id, *params))
        return _job(rows[0]) if rows else None

    def list_jobs(self, *, limit: int, offset: int, states: tuple[str, ...] = (),
                  tenant: str | None = None) -> list[JobRecord]:
        where, params = _owned(tenant)
        if states:
            where += f" AND state IN ({', '.join('?' for _ in states)})"
        rows = self._rows(
            f"SELECT {', '.join(_JOB_FIELDS)} FROM jobs WHERE 1{where} ORDER BY created_at, id LIMIT ? OFFSET ?",
            (*params, *states, limit, offset),
        )
        return [_job(r) for r in rows]

    def update_job(self, *, job_id: str, if_state: tuple[str, ...] = (), **changes: Any) -> JobRecord | None:
        """Change a job's fields; with `if_state`, only if its state is one of those (in the same statement).

        The job as it is afterwards, changed or not (None if there is no such job): several service
        processes change jobs, so a change decided on a state read earlier must say which states it
        expects, or it overwrites what another process wrote in between (a cancel racing the job's end).
        """
        unknown = set(changes) - set(_JOB_FIELDS) - {"updated_at"}
        if unknown or "id" in changes:
            raise ValueError(f"cannot update job field(s) {sorted(unknown | ({'id'} & set(changes)))}")
        changes.setdefault("updated_at", time.time())
        if "resume" in changes:
            changes["resume"] = int(changes["resume"])
        if "options" in changes:
            changes["options"] = json.dumps(changes["options"])
        sets = ", ".join(f"{k} = ?" for k in changes)
        where = f" AND state IN ({', '.join('?' for _ in if_state)})" if if_state else ""
        self._run(f"UPDATE jobs SET {sets} WHERE id = ?{where}", (*changes.values(), job_id, *if_state))
        return self.get_job(job_id=job_id)

    def close(self) -> None:
        with self._read_lock:
            if self._reader is not self._db:
                self._reader.close()
        with self._lock:
            self._db.close()


def _owned(tenant: str | None) -> tuple[str, tuple]:
    """The SQL condition (to append after a WHERE) and parameters for the rows `tenant` owns; None: every row."""
    return ("", ()) if tenant is None else (" AND owner = ?", (tenant,))


def _readable_graphs(tenant: str | None) -> tuple[str, tuple]:
    """As `_owned`, plus the bundled example graphs, which every tenant may read (only the admin deletes them)."""
    return ("", ()) if tenant is None else (" AND (owner = ? OR (owner IS NULL AND source LIKE 'bundled:%'))",
                                            (tenant,))


def _graph(row: tuple) -> GraphRecord:
    gid, name, num_ops, num_edges, source, created_at, size_bytes, owner, *data = row
    return GraphRecord(gid, name, num_ops, num_edges, source, created_at, size_bytes,
                       data=data[0] if data else None, owner=owner)


def _placement(row: tuple) -> PlacementRecord:
    pid, graph_id, method, cluster, step_time, created_at, body, job_id, owner, spec = row
    return PlacementRecord(pid, graph_id, method, cluster, step_time, created_at, json.loads(body), job_id,
                           owner=owner, cluster_spec=None if spec is None else json.loads(spec))


def _job(row: tuple) -> JobRecord:
    rec = JobRecord(*row)
    rec.resume = bool(rec.resume)
    rec.options = json.loads(rec.options) if isinstance(rec.options, str) else dict(rec.options or {})
    return rec


def open_storage(url: str) -> Storage:
    """The storage a database URL names.

    Parameters
    ----------
    url : ``sqlite:///relative/path.db``, ``sqlite:////absolute/path.db`` or
        ``sqlite:///:memory:``.

    Raises
    ------
    StorageError
        If the URL names a backend this build does not include.
    """
    parsed = urlparse(url)
    if parsed.scheme == "sqlite":
        path = unquote(parsed.path[1:] if parsed.path.startswith("/") else parsed.path)
        if not path:
            raise StorageError(f"database URL {url!r} names no file (use sqlite:///path/to/placer.db)")
        return SQLiteStorage(path)
    raise StorageError(
        f"database URL {url!r}: backend {parsed.scheme or '(none)'!r} is not included; "
        "this build stores in SQLite (sqlite:///path/to/placer.db)"
    )
