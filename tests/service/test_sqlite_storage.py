"""SQLite storage: round trips, WAL, survival across reopen, and URL selection."""

from __future__ import annotations

import time

import pytest

from service.sqlite_storage import open_storage
from service.storage import GraphRecord, JobRecord, PlacementRecord, StorageError


def _graph(gid="g_1"):
    return GraphRecord(id=gid, name="n", num_ops=3, num_edges=2, source="json", created_at=time.time(),
                       size_bytes=4, data=b"\x00abc")


def _job(jid="j_1"):
    now = time.time()
    return JobRecord(id=jid, graph_id="g_1", graph_name="n", cluster="2gpu", budget_seconds=5.0, seed=1,
                     state="queued", job_dir="/tmp/x", created_at=now, updated_at=now)


def test_round_trip_and_reopen(tmp_path):
    """Whatever was stored is there after the storage is closed and reopened."""
    url = f"sqlite:///{tmp_path}/db/placer.db"
    s = open_storage(url)
    s.add_graph(record=_graph())
    s.add_placement(record=PlacementRecord(id="p_1", graph_id="g_1", method="m", cluster="2gpu", step_time=1.5,
                                           created_at=1.0, body={"devices": {"a": "b"}}))
    s.add_job(record=_job())
    s.update_job(job_id="j_1", state="running", pid=42, resume=True)
    s.close()
    s = open_storage(url)
    assert s.get_graph(graph_id="g_1", with_data=True).data == b"\x00abc"
    assert s.get_graph(graph_id="g_1").data is None
    assert s.get_placement(placement_id="p_1").body == {"devices": {"a": "b"}}
    job = s.get_job(job_id="j_1")
    assert (job.state, job.pid, job.resume) == ("running", 42, True)
    assert [j.id for j in s.list_jobs(limit=10, offset=0, states=("running",))] == ["j_1"]
    assert s.list_jobs(limit=10, offset=0, states=("done",)) == []
    assert s._rows("PRAGMA journal_mode")[0][0] == "wal"
    assert s.delete_graph(graph_id="g_1") and not s.delete_graph(graph_id="g_1")
    s.close()


def test_update_refuses_unknown_fields(tmp_path):
    s = open_storage(f"sqlite:///{tmp_path}/p.db")
    s.add_job(record=_job())
    with pytest.raises(ValueError):
        s.update_job(job_id="j_1", colour="red")
    s.close()


@pytest.mark.parametrize("url", ["postgresql://u@h/db", "sqlite://", "nonsense"])
def test_unknown_backend(url):
    with pytest.raises(StorageError):
        open_storage(url)


def test_old_database_gains_new_columns(tmp_path):
    """A database made before jobs had options (and retries) opens, and its jobs read with empty options."""
    import sqlite3

    path = tmp_path / "old.db"
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE jobs (id TEXT PRIMARY KEY, graph_id TEXT, graph_name TEXT NOT NULL, cluster TEXT NOT NULL,"
               " budget_seconds REAL NOT NULL, seed INTEGER NOT NULL, state TEXT NOT NULL, job_dir TEXT NOT NULL,"
               " created_at REAL NOT NULL, updated_at REAL NOT NULL, pid INTEGER, error TEXT,"
               " resume INTEGER NOT NULL DEFAULT 0, attempts INTEGER NOT NULL DEFAULT 0)")
    db.execute("INSERT INTO jobs VALUES ('j_1', NULL, 'n', '2gpu', 5, 0, 'done', '/x', 1, 1, NULL, NULL, 0, 1)")
    db.commit()
    db.close()
    s = open_storage(f"sqlite:///{path}")
    assert s.get_job(job_id="j_1").options == {} and s.get_job(job_id="j_1").retries == 0
    s.update_job(job_id="j_1", options={"steps": 2})
    assert s.get_job(job_id="j_1").options == {"steps": 2}
    s.close()


def test_bundled_graph_recorded_for_good(tmp_path):
    """A bundled source is stored once, and still counts as stored after its graph is deleted."""
    s = open_storage(f"sqlite:///{tmp_path}/b.db")
    first = GraphRecord(**{**_graph("g_1").__dict__, "source": "bundled:a.json.gz"})
    assert s.add_bundled_graph(record=first)
    assert not s.add_bundled_graph(record=GraphRecord(**{**first.__dict__, "id": "g_2"}))
    assert s.delete_graph(graph_id="g_1")
    assert s.bundled_sources() == {"bundled:a.json.gz"}
    assert not s.add_bundled_graph(record=GraphRecord(**{**first.__dict__, "id": "g_3"}))
    assert s.list_graphs(limit=10, offset=0) == []
    s.close()


def _old_graphs_table(path):
    """A database as an early version left it: the graphs table alone, as it was then."""
    import sqlite3

    db = sqlite3.connect(path)
    db.execute("CREATE TABLE graphs (id TEXT PRIMARY KEY, name TEXT NOT NULL, num_ops INTEGER NOT NULL,"
               " num_edges INTEGER NOT NULL, source TEXT NOT NULL, created_at REAL NOT NULL,"
               " size_bytes INTEGER NOT NULL, data BLOB NOT NULL)")
    return db


def test_old_database_keeps_its_bundled_graphs(tmp_path):
    """Bundled graphs stored by a version without the bundled_graphs table count as stored."""
    path = tmp_path / "old.db"
    db = _old_graphs_table(path)
    db.execute("INSERT INTO graphs VALUES ('g_1', 'n', 3, 2, 'bundled:a.json.gz', 1, 4, x'00')")
    db.execute("INSERT INTO graphs VALUES ('g_2', 'n', 3, 2, 'json', 2, 4, x'00')")
    db.commit()
    db.close()
    s = open_storage(f"sqlite:///{path}")
    assert s.bundled_sources() == {"bundled:a.json.gz"}
    s.close()


def test_opening_waits_for_another_process_writing(tmp_path):
    """Switching a file to WAL while another connection writes to it got "database is locked" at once (SQLite
    does not wait its busy timeout there), so a worker of ``placer serve --workers N`` starting beside another
    on a fresh data dir failed; opening now waits for the writer."""
    import sqlite3
    import threading

    path = tmp_path / "placer.db"
    writer = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    writer.execute("CREATE TABLE t (x)")
    writer.execute("BEGIN IMMEDIATE")
    writer.execute("INSERT INTO t VALUES (1)")
    done = threading.Timer(0.3, lambda: writer.execute("COMMIT"))
    done.start()
    storage = open_storage(f"sqlite:///{path}")
    done.join()
    assert storage.list_graphs(limit=1, offset=0) == []
    storage.close()
    writer.close()


def test_a_job_past_the_queue_limit_is_not_stored(tmp_path):
    """The limit is checked in the insert itself: a count read before it let concurrent requests past."""
    s = open_storage(f"sqlite:///{tmp_path}/p.db")
    assert s.add_job(record=_job("j_1"), max_queued=2) and s.add_job(record=_job("j_2"), max_queued=2)
    assert not s.add_job(record=_job("j_3"), max_queued=2)
    assert s.get_job(job_id="j_3") is None
    s.update_job(job_id="j_1", state="running")
    assert s.add_job(record=_job("j_3"), max_queued=2)  # one left the queue
    assert s.add_job(record=_job("j_4"))  # no limit asked for
    s.close()


def test_old_database_rows_belong_to_the_admin(tmp_path):
    """Rows stored before tenancy have no owner: the admin's (every row), never another key's."""
    path = tmp_path / "old.db"
    db = _old_graphs_table(path)
    db.execute("CREATE TABLE placements (id TEXT PRIMARY KEY, graph_id TEXT, method TEXT NOT NULL,"
               " cluster TEXT NOT NULL, step_time REAL, created_at REAL NOT NULL, body TEXT NOT NULL, job_id TEXT)")
    db.execute("INSERT INTO graphs VALUES ('g_1', 'n', 3, 2, 'json', 1, 4, x'00')")
    db.execute("INSERT INTO placements VALUES ('p_1', 'g_1', 'm', '2gpu', 1.0, 1, '{}', NULL)")
    db.commit()
    db.close()
    s = open_storage(f"sqlite:///{path}")
    assert s.get_graph(graph_id="g_1").owner is None and s.get_graph(graph_id="g_1", tenant="k_a") is None
    placement = s.get_placement(placement_id="p_1")
    assert placement.owner is None and placement.cluster_spec is None
    assert s.list_placements(limit=10, offset=0, tenant="k_a") == []
    assert not s.delete_graph(graph_id="g_1", tenant="k_a") and s.delete_graph(graph_id="g_1")
    s.close()


def test_tenant_reads_its_own_rows(tmp_path):
    s = open_storage(f"sqlite:///{tmp_path}/t.db")
    s.add_graph(record=GraphRecord(**{**_graph("g_a").__dict__, "owner": "k_a"}))
    s.add_graph(record=GraphRecord(**{**_graph("g_b").__dict__, "owner": "k_b"}))
    s.add_job(record=JobRecord(**{**_job("j_a").__dict__, "owner": "k_a"}))
    s.add_placement(record=PlacementRecord(id="p_a", graph_id="g_a", method="m", cluster="c", step_time=1.0,
                                           created_at=1.0, body={}, owner="k_a", cluster_spec={"name": "c"}))
    assert [g.id for g in s.list_graphs(limit=10, offset=0, tenant="k_a")] == ["g_a"]
    assert s.get_graph(graph_id="g_b", tenant="k_a") is None and s.get_graph(graph_id="g_b").owner == "k_b"
    assert s.get_job(job_id="j_a", tenant="k_b") is None and s.get_job(job_id="j_a", tenant="k_a").owner == "k_a"
    assert s.list_jobs(limit=10, offset=0, tenant="k_b") == []
    assert s.get_placement(placement_id="p_a", tenant="k_a").cluster_spec == {"name": "c"}
    assert s.get_placement(placement_id="p_a", tenant="k_b") is None
    s.close()


_FILL_DISK = """
import os, sys, time
from service.sqlite_storage import open_storage
from service.storage import GraphRecord, StorageFull
s = open_storage(f"sqlite:///{sys.argv[1]}/placer.db")
n = 0
try:
    while True:
        n += 1
        s.add_graph(record=GraphRecord(id=f"g_{n}", name="n", num_ops=1, num_edges=0, source="json",
                                       created_at=time.time(), size_bytes=1, data=os.urandom(300_000)))
except StorageFull:
    pass
assert s.delete_graph(graph_id="g_1") and s.delete_graph(graph_id="g_2"), "nothing deleted"
s.add_graph(record=GraphRecord(id="g_new", name="n", num_ops=1, num_edges=0, source="json",
                               created_at=time.time(), size_bytes=1, data=os.urandom(200_000)))
print("ok")
"""


def test_delete_frees_space_on_a_full_disk(tmp_path):
    """On a really full file system (a 20 MB tmpfs, mounted in a user namespace) a DELETE succeeds and what
    it frees takes new rows; it was a 507 (in WAL mode a delete is a write), so space could not be freed."""
    import os
    import shutil
    import subprocess
    import sys

    if shutil.which("unshare") is None:
        pytest.skip("needs unshare(1) to mount a small file system")
    disk = tmp_path / "disk"
    disk.mkdir()
    probe = subprocess.run(["unshare", "--user", "--map-root-user", "--mount", "sh", "-c",
                            f"mount -t tmpfs -o size=20m tmpfs {disk}"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs in a user namespace here: {probe.stderr.decode().strip()}")
    script = tmp_path / "fill.py"
    script.write_text(_FILL_DISK)
    r = subprocess.run(["unshare", "--user", "--map-root-user", "--mount", "sh", "-c",
                        f"mount -t tmpfs -o size=20m tmpfs {disk} && exec {sys.executable} {script} {disk}"],
                       capture_output=True, text=True, timeout=120, env=os.environ)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stdout + r.stderr
