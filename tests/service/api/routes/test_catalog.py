"""Routes /v1/clusters, /v1/placers and /healthz."""

from __future__ import annotations

from placer import presets
from placer.placers import registry


def test_clusters(client):
    """Every preset with its spec; local:N is announced as a pattern."""
    body = client.get("/v1/clusters").json()
    assert [c["name"] for c in body["data"]] == [c.name for c in presets.all_presets()]
    assert body["parametric"] == ["local:N"]
    two = next(c for c in body["data"] if c["name"] == "2gpu")
    assert len(two["spec"]["devices"]) == 3 and "V100" in two["description"]


def test_placers(client):
    """Every registered placer, plus best and rl."""
    body = client.get("/v1/placers").json()
    names = [p["name"] for p in body["data"]]
    assert names[: len(registry.names())] == registry.names()
    assert "best" in names and "rl" in names
    assert {p["kind"] for p in body["data"]} <= {"heuristic", "learned", "meta"}


def test_placers_list_their_options(client, graph_id):
    """Each heuristic lists the options it takes, with what they do; a listed option is taken, and its
    listing is the registry's (read from the placer's signature, which the registry checks against)."""
    data = {p["name"]: p for p in client.get("/v1/placers").json()["data"]}
    assert set(data["m_sct"]["options"]) == {"lp_time_limit", "follow_forward", "time_limit"}
    assert "default 60" in data["m_sct"]["options"]["lp_time_limit"]
    assert data["metis"]["options"] == {} and data["best"]["options"] == {}
    for name in registry.names(heuristic_only=True):
        assert data[name]["options"] == registry.get(name).options
    r = client.post("/v1/placements", json={"graph_id": graph_id, "cluster": "2gpu", "method": "m_etf",
                                            "options": {"follow_forward": True}})
    assert r.status_code == 201, r.text
    r = client.post("/v1/placements", json={"graph_id": graph_id, "cluster": "2gpu", "method": "m_etf",
                                            "options": {"follow_forward": "false"}})
    assert r.status_code == 422 and "follow_forward must be true or false" in r.json()["detail"]


def test_rl_is_described_as_the_api_takes_it(client, graph_id):
    """rl's description names the request fields and options POST /v1/placements accepts, and no others."""
    from service.models import TrainOptions

    rl = next(p for p in client.get("/v1/placers").json()["data"] if p["name"] == "rl")
    for name in [*TrainOptions.model_fields, "budget_seconds", "seed", "wait_seconds"]:
        assert name in rl["description"]
    assert "policy=" not in rl["description"] and "best_of" not in rl["description"]
    assert set(rl["options"]) == set(TrainOptions.model_fields) and rl["options"]["samples"]
    r = client.post("/v1/placements", json={"graph_id": graph_id, "method": "rl", "options": {"policy": "shipped"}})
    assert r.status_code == 422  # what the command line's description offers, the API does not take


def test_rl_options_say_their_defaults(client):
    """README: GET /v1/placers gives each option with what it does and its default; rl's are the trainer's."""
    from placer.rl.trainer import TrainConfig

    options = next(p for p in client.get("/v1/placers").json()["data"] if p["name"] == "rl")["options"]
    for name, description in options.items():
        assert "default" in description.lower(), (name, description)
    defaults = TrainConfig()
    assert f"default {defaults.samples})" in options["samples"]
    assert f"default {defaults.groups};" in options["groups"]
    assert f"with init 'none', '{defaults.warm_start}'" in options["warm_start"]


def test_healthz(client):
    assert client.get("/healthz").json() == {"status": "ok", "version": "0.1.0", "auth": False, "jobs_running": 0}


def test_openapi_and_docs(client):
    """The OpenAPI document lists every route; /docs serves the UI."""
    paths = client.get("/openapi.json").json()["paths"]
    for path in ("/v1/graphs", "/v1/graphs/{graph_id}", "/v1/placements", "/v1/placements/{placement_id}",
                 "/v1/jobs", "/v1/jobs/{job_id}", "/v1/clusters", "/v1/placers", "/healthz"):
        assert path in paths
    assert client.get("/docs").status_code == 200
