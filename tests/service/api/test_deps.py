"""The API-key check: every /v1 route needs a key when keys are set; /healthz and docs never do."""

from __future__ import annotations

import pytest


@pytest.fixture
def locked(make_client):
    return make_client(api_keys=["k1", "k2"])


def test_no_key_is_401(locked):
    r = locked.get("/v1/graphs")
    assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer"
    assert "Bearer" in r.json()["detail"]


@pytest.mark.parametrize("path", ["/v1/graphs", "/v1/jobs", "/v1/clusters", "/v1/placers",
                                  "/v1/graphs/g_x", "/v1/placements/p_x", "/v1/jobs/j_x"])
def test_every_route_checks(locked, path):
    assert locked.get(path).status_code == 401
    assert locked.get(path, headers={"Authorization": "Bearer nope"}).status_code == 401


def test_post_checks_before_parsing(locked):
    assert locked.post("/v1/placements", json={}).status_code == 401
    assert locked.post("/v1/graphs", content=b"x").status_code == 401


def test_any_configured_key_works(locked):
    for key in ("k1", "k2"):
        assert locked.get("/v1/graphs", headers={"Authorization": f"Bearer {key}"}).status_code == 200


def test_open_routes(locked):
    """Liveness and the docs stay open."""
    assert locked.get("/healthz").json()["auth"] is True
    assert locked.get("/openapi.json").status_code == 200
    assert locked.get("/docs").status_code == 200


def test_no_keys_no_check(client):
    assert client.get("/v1/graphs").status_code == 200


def test_post_without_key_is_refused_before_its_body_is_read(locked):
    """The 401 comes before the body is read: FastAPI parsed a body (0.7 s for 32 MB) before the key check."""
    from service.main import AuthFirstMiddleware

    reads = []

    async def app(scope, receive, send):  # what the middleware wraps: reads the body, then answers 200
        reads.append(await receive())
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    settings = locked.app.state.settings
    from fastapi.testclient import TestClient

    guarded = TestClient(AuthFirstMiddleware(app, settings))
    assert guarded.post("/v1/placements", content=b"x" * 1000).status_code == 401
    assert reads == []
    ok = guarded.post("/v1/placements", content=b"x", headers={"Authorization": "Bearer k1"})
    assert ok.status_code == 200 and len(reads) == 1
    assert guarded.post("/healthz", content=b"x").status_code == 200  # outside /v1: not its business


class TestTenancy:
    """Each key sees its own graphs, placements and jobs; the admin key sees all (#41)."""

    @pytest.fixture
    def service(self, make_client):
        return make_client(api_keys=["k1", "k2"], admin_key="adm")

    @staticmethod
    def _as(key):
        return {"Authorization": f"Bearer {key}"}

    def _stored(self, client, key):
        """A graph, a placement and a job of `key`: their ids."""
        from tests.service.conftest import tiny_graph

        h = self._as(key)
        graph_id = client.post("/v1/graphs", json=tiny_graph(key), headers=h).json()["id"]
        placement = client.post("/v1/placements", json={"graph_id": graph_id, "cluster": "2gpu",
                                                         "method": "round_robin"}, headers=h)
        job = client.post("/v1/jobs", json={"graph_id": graph_id, "budget_seconds": 0.2}, headers=h)
        assert placement.status_code == 201 and job.status_code == 201, (placement.text, job.text)
        return {"graphs": graph_id, "placements": placement.json()["id"], "jobs": job.json()["id"]}

    def test_another_key_gets_404_and_empty_lists(self, service):
        mine = self._stored(service, "k1")
        theirs = self._as("k2")
        for kind, item in mine.items():
            assert service.get(f"/v1/{kind}/{item}", headers=theirs).status_code == 404, kind
            assert service.get(f"/v1/{kind}", headers=theirs).json()["count"] == 0, kind
            assert service.get(f"/v1/{kind}/{item}", headers=self._as("k1")).status_code == 200, kind
        assert service.get(f"/v1/placements/{mine['placements']}/trace", headers=theirs).status_code == 404
        assert service.get(f"/v1/jobs/{mine['jobs']}/history", headers=theirs).status_code == 404
        # nor can it use, cancel or delete them
        r = service.post("/v1/placements", json={"graph_id": mine["graphs"], "method": "single"}, headers=theirs)
        assert r.status_code == 404
        assert service.delete(f"/v1/jobs/{mine['jobs']}", headers=theirs).status_code == 404
        assert service.delete(f"/v1/graphs/{mine['graphs']}", headers=theirs).status_code == 404
        assert service.get(f"/v1/graphs/{mine['graphs']}", headers=self._as("k1")).status_code == 200

    def test_admin_sees_and_deletes_everything(self, service):
        first, second = self._stored(service, "k1"), self._stored(service, "k2")
        admin = self._as("adm")
        for kind in first:
            listed = {x["id"] for x in service.get(f"/v1/{kind}", headers=admin).json()["data"]}
            assert {first[kind], second[kind]} <= listed, kind
        assert service.delete(f"/v1/graphs/{first['graphs']}", headers=admin).status_code == 204

    def test_bundled_graphs_are_read_by_every_key_deleted_by_the_admin(self, service):
        from placer.graph import OpGraph
        from service.graph_store import graph_record
        from tests.service.conftest import tiny_graph

        record = graph_record(OpGraph.from_dict(tiny_graph("example")), "bundled:example.json.gz")
        service.app.state.storage.add_bundled_graph(record=record)
        for key in ("k1", "k2"):
            assert [g["id"] for g in service.get("/v1/graphs", headers=self._as(key)).json()["data"]] == [record.id]
        assert service.delete(f"/v1/graphs/{record.id}", headers=self._as("k1")).status_code == 403
        assert service.delete(f"/v1/graphs/{record.id}", headers=self._as("adm")).status_code == 204

    def test_the_database_never_holds_a_key(self, service):
        self._stored(service, "k1")
        db = service.app.state.storage
        owners = {row[0] for table in ("graphs", "placements", "jobs")
                  for row in db._rows(f"SELECT owner FROM {table}")}
        assert len(owners) == 1 and "k1" not in next(iter(owners))

    def test_without_keys_one_tenant(self, client):
        """No keys: everything stored is everyone's, as before, and belongs to the admin once keys are set."""
        from tests.service.conftest import tiny_graph

        graph_id = client.post("/v1/graphs", json=tiny_graph()).json()["id"]
        assert client.get(f"/v1/graphs/{graph_id}").status_code == 200
        assert client.app.state.storage.get_graph(graph_id=graph_id).owner is None
