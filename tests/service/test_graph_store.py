"""GraphStore: bundled graphs stored once, the parsed-graph cache."""

from __future__ import annotations

import gzip
import json

from placer.synthetic import layered_graph
from service.graph_store import GraphStore
from service.storage import open_storage
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


def test_cache_returns_the_same_graph(tmp_path):
    storage = open_storage(f"sqlite:///{tmp_path}/db.sqlite")
    store = GraphStore(storage, cache_size=1)
    a = store.add(layered_graph(5), source="json")
    b = store.add(layered_graph(6), source="json")
    assert store.load(b.id) is store.load(b.id)
    assert len(store.load(a.id)) == 5  # evicted, read back from storage
    assert store.load("g_missing") is None
    storage.close()
