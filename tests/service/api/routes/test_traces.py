"""Routes /v1/placements/{id}/trace, /v1/jobs/{id}/history and the web page at /."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.service.conftest import tiny_graph, wait_for


def test_trace_of_stored_placement(client, graph_id):
    """The trace has one complete event per op, ending at the placement's step time."""
    p = client.post("/v1/placements", json={"graph_id": graph_id, "cluster": "2gpu", "method": "best"}).json()
    r = client.get(f"/v1/placements/{p['id']}/trace")
    assert r.status_code == 200, r.text
    trace = r.json()
    ops = [e for e in trace["traceEvents"] if e["ph"] == "X" and e["cat"] != "transfer"]
    assert sorted(e["name"] for e in ops) == ["mm", "out", "x"]
    assert max(e["ts"] + e["dur"] for e in ops) / 1e6 == pytest.approx(p["step_time"], rel=1e-12)
    assert trace["otherData"]["cluster"] == "2gpu"


def test_trace_for_display(client, graph_id):
    """?bars=N: the web page's form, every op in otherData.ops; a bar count out of range is a 422 naming it."""
    p = client.post("/v1/placements", json={"graph_id": graph_id, "cluster": "2gpu", "method": "best"}).json()
    r = client.get(f"/v1/placements/{p['id']}/trace", params={"bars": 500})
    assert r.status_code == 200, r.text
    other = r.json()["otherData"]
    assert sorted(other["ops"]["name"]) == ["mm", "out", "x"] and other["display"]["bars"] == 500
    for bad in (0, 10**6, "many"):
        r = client.get(f"/v1/placements/{p['id']}/trace", params={"bars": bad})
        assert r.status_code == 422 and "bars" in r.text


def test_trace_errors(client):
    """Unknown id: 404; inline graph (not kept): 409 saying what to do."""
    assert client.get("/v1/placements/p_0000000000000000/trace").status_code == 404
    p = client.post("/v1/placements", json={"graph": tiny_graph(), "cluster": "2gpu", "method": "best"}).json()
    r = client.get(f"/v1/placements/{p['id']}/trace")
    assert r.status_code == 409 and "POST /v1/graphs" in r.json()["detail"]


def test_trace_deleted_graph(client, graph_id):
    p = client.post("/v1/placements", json={"graph_id": graph_id, "cluster": "2gpu", "method": "best"}).json()
    client.delete(f"/v1/graphs/{graph_id}")
    assert client.get(f"/v1/placements/{p['id']}/trace").status_code == 410


def test_job_history(client, graph_id, settings):
    """history.csv rows come back as numbers; a half-written last line is dropped."""
    job = client.post("/v1/jobs", json={"graph_id": graph_id, "budget_seconds": 0.3}).json()
    assert client.get(f"/v1/jobs/{job['id']}/history").json() == {"data": [], "count": 0}
    wait_for(lambda: client.get(f"/v1/jobs/{job['id']}").json()["state"] == "done")
    path = Path(settings.jobs_dir) / job["id"] / "history.csv"
    path.write_text("step,best_step_time\n1,0.5\n2,0.25\n3,0.")
    assert client.get(f"/v1/jobs/{job['id']}/history").json()["data"] == [
        {"step": 1.0, "best_step_time": 0.5}, {"step": 2.0, "best_step_time": 0.25}]
    assert client.get("/v1/jobs/j_0000000000000000/history").status_code == 404


def test_web_page_and_assets(make_client):
    """The page and its assets are served without a key (the API still needs one)."""
    client = make_client(api_keys=["k1"])
    page = client.get("/")
    assert page.status_code == 200 and "/web/app.js" in page.text
    assert "default-src 'self'" in page.headers["content-security-policy"]
    assert client.get("/web/app.js").headers["content-type"].startswith("text/javascript")
    assert client.get("/web/app.css").status_code == 200
    assert client.get("/web/nope.js").status_code == 404
    assert client.get("/v1/graphs").status_code == 401


def test_web_page_loads_nothing_from_elsewhere(client):
    """Offline: every file the page names is served here, and no script or style names another host."""
    page = client.get("/").text
    refs = re.findall(r'(?:src|href)="([^"]*)"', page)
    assert refs and all(r.startswith("/") and not r.startswith("//") for r in refs), refs
    for ref in refs:
        assert client.get(ref).status_code == 200, ref
    for name in ("app.js", "app.css"):
        text = client.get(f"/web/{name}").text.replace('"http://www.w3.org/2000/svg"', "")  # a name, not a fetch
        assert not re.search(r"https?:|//[\w.-]+\.\w|@import", text), name


def test_trace_uses_the_cluster_the_placement_was_made_on(client, graph_id):
    """An inline cluster that keeps a preset's name (GET /v1/clusters' spec, edited and sent back) is traced
    on that spec, not on the preset: the trace ended at the preset's step time, not the placement's (#41)."""
    spec = next(c["spec"] for c in client.get("/v1/clusters").json()["data"] if c["name"] == "2gpu")
    for device in spec["devices"]:  # the same name, a much slower cluster
        for rate in ("peak_flops", "matrix_flops"):
            if rate in device:
                device[rate] /= 1000
        device["dispatch"] = 1e-3  # tiny ops cost their dispatch, not their FLOPs
    p = client.post("/v1/placements", json={"graph_id": graph_id, "cluster": spec, "method": "round_robin"}).json()
    preset = client.post("/v1/placements", json={"graph_id": graph_id, "cluster": "2gpu",
                                                 "method": "round_robin"}).json()
    assert p["cluster"] == "2gpu" and p["step_time"] > 1.5 * preset["step_time"]
    stored = client.get(f"/v1/placements/{p['id']}").json()
    assert stored["cluster_spec"]["devices"][0]["peak_flops"] == spec["devices"][0]["peak_flops"]
    trace = client.get(f"/v1/placements/{p['id']}/trace").json()
    ops = [e for e in trace["traceEvents"] if e["ph"] == "X" and e["cat"] != "transfer"]
    assert max(e["ts"] + e["dur"] for e in ops) / 1e6 == pytest.approx(p["step_time"], rel=1e-9)
    assert client.get("/v1/placements").json()["data"][0]["cluster_spec"] is None  # lists stay small
