"""GraphStore: bundled graphs stored once, the parsed-graph cache."""

from __future__ import annotations

import gzip
import json
import multiprocessing
from pathlib import Path

from placer.synthetic import layered_graph
from service.graph_store import GraphStore
from service.sqlite_storage import open_storage
from tests.service.conftest import wait_for


def test_bundled_graphs_stored_once(tmp_path, make_client):
    """Bundled graphs are listed after start-up, once, however often the service starts; bad files are skipped."""
    folder = tmp_path / "bundled"
    folder.mkdir()
    (folder / "small.json.gz").write_bytes(gzip.compress(json.dumps(layered_graph(20).to_dict()).encode()))
    (folder / "broken.json.gz").write_bytes(b"\x1f\x8bnot gzip")
    client = make_client(bundled_graphs_dir=folder)
    listed = wait_for(lambda: client.get("/v1/graphs").json()["data"])
    assert [(g["name"], g["source"]) for g in listed] == [("layered20", "bundled:small.json.gz")]
    client.__exit__(None, None, None)
    again = make_client(bundled_graphs_dir=folder)
    assert [g["id"] for g in again.get("/v1/graphs").json()["data"]] == [listed[0]["id"]]


def _write_bundled(folder: Path, sizes: list[int]) -> None:
    folder.mkdir(exist_ok=True)
    for n in sizes:
        (folder / f"layered{n}.json.gz").write_bytes(gzip.compress(json.dumps(layered_graph(n).to_dict()).encode()))


def _seed(url: str, folder: str, start, added) -> None:
    """One service worker's start: open the shared database, wait for the others, store the bundled graphs."""
    storage = open_storage(url)
    start.wait()
    added.put(len(GraphStore(storage).add_bundled(Path(folder))))
    storage.close()


def test_workers_starting_together_store_each_bundled_graph_once(tmp_path):
    """Four processes seeding one fresh database at once (placer serve --workers 4) store one copy of each file."""
    folder = tmp_path / "bundled"
    _write_bundled(folder, [200, 300, 400])
    url = f"sqlite:///{tmp_path}/data/placer.db"
    ctx = multiprocessing.get_context("spawn")
    start, added = ctx.Barrier(4), ctx.Queue()
    workers = [ctx.Process(target=_seed, args=(url, str(folder), start, added)) for _ in range(4)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(timeout=120)
    assert [w.exitcode for w in workers] == [0, 0, 0, 0]
    assert sum(added.get(timeout=5) for _ in workers) == 3
    storage = open_storage(url)
    stored = storage.list_graphs(limit=100, offset=0)
    assert sorted(g.source for g in stored) == [f"bundled:layered{n}.json.gz" for n in (200, 300, 400)]
    storage.close()


def test_deleted_bundled_graph_stays_deleted(tmp_path, make_client):
    """A bundled graph the user deleted is not stored again at the next start; a new bundled file is."""
    folder = tmp_path / "bundled"
    _write_bundled(folder, [20])
    client = make_client(bundled_graphs_dir=folder)
    first = wait_for(lambda: client.get("/v1/graphs").json()["data"])
    assert client.delete(f"/v1/graphs/{first[0]['id']}").status_code == 204
    client.__exit__(None, None, None)  # waits for its bundled-graph thread
    _write_bundled(folder, [30])
    again = make_client(bundled_graphs_dir=folder)
    listed = wait_for(lambda: again.get("/v1/graphs").json()["data"])
    assert [g["source"] for g in listed] == ["bundled:layered30.json.gz"]


def test_cache_returns_the_same_graph(tmp_path):
    storage = open_storage(f"sqlite:///{tmp_path}/db.sqlite")
    store = GraphStore(storage, cache_size=1)
    a = store.add(layered_graph(5), source="json")
    b = store.add(layered_graph(6), source="json")
    assert store.load(b.id) is store.load(b.id)
    assert len(store.load(a.id)) == 5  # evicted, read back from storage
    assert store.load("g_missing") is None
    storage.close()
