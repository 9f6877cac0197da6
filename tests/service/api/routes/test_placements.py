"""Routes /v1/placements: each method kind, baselines, and every request error."""

from __future__ import annotations

import gzip
import json

import pytest

from placer.placers import registry
from service import placing
from tests.service.conftest import tiny_graph, wait_for


@pytest.fixture
def heuristic() -> str:
    """Any registered heuristic (the service is written against the registry, not names)."""
    names = registry.names(heuristic_only=True)
    if not names:
        pytest.skip("no heuristic placer registered")
    return names[0]


class TestHeuristic:
    def test_stored_graph(self, client, graph_id, heuristic):
        """A heuristic places every op on a device of the cluster, scored by the simulator."""
        r = client.post("/v1/placements", json={"graph_id": graph_id, "cluster": "2gpu", "method": heuristic})
        assert r.status_code == 201, r.text
        p = r.json()
        assert p["method"] == heuristic and p["graph_id"] == graph_id and p["cluster"] == "2gpu"
        assert set(p["devices"]) == {"x", "mm", "out"}
        assert set(p["devices"].values()) <= {"/device:CPU:0", "/device:GPU:0", "/device:GPU:1"}
        assert p["step_time"] > 0 and p["oom"] is False and p["baselines"] is None
        assert client.get(f"/v1/placements/{p['id']}").json() == p

    def test_list(self, client, graph_id, heuristic):
        """Placements are listed oldest first."""
        ids = [client.post("/v1/placements", json={"graph_id": graph_id, "method": heuristic}).json()["id"]
               for _ in range(2)]
        listed = client.get("/v1/placements").json()
        assert [p["id"] for p in listed["data"]] == ids and listed["count"] == 2
        assert client.get("/v1/placements?offset=1").json()["data"][0]["id"] == ids[1]
        assert listed["data"][0]["devices"] == {}
        full = client.get("/v1/placements?include_devices=true").json()["data"][0]
        assert set(full["devices"]) == {"x", "mm", "out"}

    def test_inline_graph_and_cluster(self, client, heuristic):
        """An inline graph on an inline cluster spec."""
        cluster = {"name": "two", "default_link": {"bandwidth": 1e10, "latency": 1e-5}, "devices": [
            {"name": "a", "kind": "cpu", "peak_flops": 1e12, "memory_bandwidth": 1e11, "memory_bytes": 1e10},
            {"name": "b", "kind": "gpu", "peak_flops": 1e13, "memory_bandwidth": 9e11, "memory_bytes": 1e10}]}
        r = client.post("/v1/placements", json={"graph": tiny_graph(), "cluster": cluster, "method": heuristic})
        assert r.status_code == 201, r.text
        assert r.json()["cluster"] == "two" and set(r.json()["devices"].values()) <= {"a", "b"}

    def test_baselines(self, client, graph_id, heuristic):
        """baselines=true answers every heuristic's simulated step time."""
        r = client.post("/v1/placements", json={"graph_id": graph_id, "cluster": "4gpu", "method": heuristic,
                                                "baselines": True})
        base = r.json()["baselines"]
        assert set(base) == set(placing.candidates("step_time")) | {heuristic}
        assert base[heuristic] == r.json()["step_time"]

    def test_best(self, client, graph_id, heuristic):
        """best answers the fastest heuristic's placement, with all their step times."""
        r = client.post("/v1/placements", json={"graph_id": graph_id, "cluster": "4gpu", "method": "best"})
        assert r.status_code == 201, r.text
        p = r.json()
        times = [t for t in p["baselines"].values() if t is not None]
        assert p["step_time"] == min(times)
        assert p["method"].startswith("best:")


class TestErrors:
    def test_unknown_graph_id(self, client):
        r = client.post("/v1/placements", json={"graph_id": "g_nope", "method": "best"})
        assert r.status_code == 404 and "g_nope" in r.json()["detail"]

    def test_unknown_cluster(self, client, graph_id):
        """An unknown preset is a 422 listing the presets."""
        r = client.post("/v1/placements", json={"graph_id": graph_id, "cluster": "99tpu"})
        assert r.status_code == 422 and "99tpu" in r.json()["detail"] and "2gpu" in r.json()["detail"]

    def test_cluster_never_a_file(self, client, graph_id, tmp_path):
        """A cluster name is never read as a path on the server."""
        path = tmp_path / "c.json"
        path.write_text("{}")
        r = client.post("/v1/placements", json={"graph_id": graph_id, "cluster": str(path)})
        assert r.status_code == 422

    def test_bad_inline_cluster(self, client, graph_id):
        r = client.post("/v1/placements", json={"graph_id": graph_id, "cluster": {
            "name": "c", "devices": [{"name": "d", "kind": "gpu", "peak_flops": -1, "memory_bandwidth": 1,
                                      "memory_bytes": 1}]}})
        assert r.status_code == 422 and "peak_flops" in r.json()["detail"]

    def test_unknown_method(self, client, graph_id):
        """An unknown method is a 422 listing the methods, best and rl included."""
        r = client.post("/v1/placements", json={"graph_id": graph_id, "method": "oracle"})
        assert r.status_code == 422 and "oracle" in r.json()["detail"]
        listed = r.json()["detail"].split("methods: ")[1].split(", ")
        assert listed == [p["name"] for p in client.get("/v1/placers").json()["data"]]
        assert "best" in listed and "rl" in listed

    @pytest.mark.parametrize("value", ["yes", "true", 1, None])
    def test_baselines_must_be_a_boolean(self, client, graph_id, heuristic, value):
        """baselines is strict: "yes" is not taken for true."""
        r = client.post("/v1/placements", json={"graph_id": graph_id, "method": heuristic, "baselines": value})
        assert r.status_code == 422
        assert [(e["loc"], e["msg"]) for e in r.json()["detail"]] == [
            (["body", "baselines"], "Input should be a valid boolean")]

    @pytest.mark.parametrize("field, literal", [("refine_seconds", "1e400"), ("budget_seconds", "NaN"),
                                                ("wait_seconds", "Infinity")])
    def test_a_number_past_any_float_is_refused_as_not_finite(self, client, graph_id, field, literal):
        """1e400 read as infinity was answered "should be less than or equal to 60", its input shown as null."""
        body = '{"graph_id": "%s", "method": "single", "%s": %s}' % (graph_id, field, literal)
        r = client.post("/v1/placements", content=body, headers={"Content-Type": "application/json"})
        assert r.status_code == 422
        assert [(e["loc"], e["msg"]) for e in r.json()["detail"]] == [
            (["body", field], "Input should be a finite number")]

    def test_validation_errors_are_brief_and_name_the_spec_field(self, client, graph_id):
        """An over-long inline cluster is one error naming cluster.devices, without echoing the body back."""
        from service.models import MAX_DEVICES

        dev = {"kind": "cpu", "peak_flops": 1e12, "memory_bandwidth": 1e11, "memory_bytes": 1e10}
        cluster = {"name": "big", "default_link": {"bandwidth": 1e10},
                   "devices": [{"name": f"d{i}", **dev} for i in range(4 * MAX_DEVICES)]}
        r = client.post("/v1/placements", json={"graph_id": graph_id, "cluster": cluster, "method": "single"})
        assert r.status_code == 422
        errors = r.json()["detail"]
        assert [e["loc"] for e in errors] == [["body", "cluster", "devices"]]
        assert errors[0]["msg"].startswith(f"List should have at most {MAX_DEVICES} items")
        assert "input" not in errors[0] and len(r.content) < 1000

    def test_long_string_input_is_shortened(self, client, graph_id):
        r = client.post("/v1/placements", json={"graph_id": graph_id, "objective": "x", "baselines": "y" * 10_000})
        assert r.status_code == 422 and len(r.content) < 1000
        assert r.json()["detail"][0]["input"].endswith("(10000 characters)")

    @pytest.mark.parametrize("cluster", [5, ["2gpu"], None])
    def test_cluster_neither_name_nor_spec(self, client, graph_id, cluster):
        """A cluster that is neither a string nor an object is one error that says what it must be."""
        r = client.post("/v1/placements", json={"graph_id": graph_id, "cluster": cluster})
        assert r.status_code == 422
        assert [(e["loc"], e["type"]) for e in r.json()["detail"]] == [(["body", "cluster"], "cluster_type")]
        assert "preset name" in r.json()["detail"][0]["msg"]

    def test_unknown_option(self, client, graph_id, heuristic):
        r = client.post("/v1/placements", json={"graph_id": graph_id, "method": heuristic,
                                                "options": {"no_such_knob": 1}})
        assert r.status_code == 422 and "no_such_knob" in r.json()["detail"]

    @pytest.mark.parametrize("method,option,value", [("pipeline_dp", "time_limit", 1e9),
                                                     ("m_sct", "lp_time_limit", 1e9),
                                                     ("heft", "time_limit", 1e9),
                                                     ("pipeline_dp", "pair_budget", 10**15)])
    def test_option_over_the_service_limit(self, client, graph_id, monkeypatch, method, option, value):
        """An option that sets how long a placer may run is capped, as refine_seconds is: time_limit 1e9 would
        hold a request thread and a core for decades. The placer is not run."""
        def ran(*args, **kwargs):
            raise AssertionError("the placer ran")

        monkeypatch.setattr(registry, "place", ran)
        r = client.post("/v1/placements", json={"graph_id": graph_id, "method": method, "options": {option: value}})
        assert r.status_code == 422 and option in r.json()["detail"] and "at most" in r.json()["detail"]

    def test_options_with_best(self, client, graph_id):
        r = client.post("/v1/placements", json={"graph_id": graph_id, "method": "best", "options": {"k": 1}})
        assert r.status_code == 422

    def test_unknown_objective(self, client, graph_id, heuristic):
        r = client.post("/v1/placements", json={"graph_id": graph_id, "method": heuristic, "objective": "joy"})
        assert r.status_code == 422 and "joy" in r.json()["detail"]

    def test_both_or_neither_graph(self, client, graph_id):
        """Exactly one of graph_id and graph."""
        assert client.post("/v1/placements", json={"method": "best"}).status_code == 422
        r = client.post("/v1/placements", json={"graph_id": graph_id, "graph": tiny_graph()})
        assert r.status_code == 422

    def test_inline_cycle(self, client):
        g = tiny_graph()
        g["nodes"][0]["inputs"] = ["out"]
        r = client.post("/v1/placements", json={"graph": g})
        assert r.status_code == 422 and "cycle" in r.json()["detail"]

    @pytest.mark.parametrize("field, value", [
        ("output_bytes", "1280"), ("flops", True), ("param_bytes", False), ("cost", {"gpu": "1e-3"}),
        ("transfer_time", True), ("output_shapes", [[32.0, 10]]), ("output_shapes", [[True, 10]]),
    ])
    def test_inline_wrong_types_as_an_upload(self, client, field, value):
        """An inline graph's numbers are as strict as an uploaded file's: pydantic turned "1280" into 1280.0 and
        true into 1.0, so a graph the upload refuses was placed."""
        g = tiny_graph()
        g["nodes"][1][field] = value
        assert client.post("/v1/graphs", json=g).status_code == 422
        r = client.post("/v1/placements", json={"graph": g, "method": "single"})
        assert r.status_code == 422 and field in json.dumps(r.json()["detail"])
        assert client.post("/v1/jobs", json={"graph": g, "budget_seconds": 0.2}).status_code == 422

    def test_inline_unknown_field(self, client):
        g = tiny_graph()
        g["nodes"][0]["colour"] = "red"
        assert client.post("/v1/placements", json={"graph": g}).status_code == 422

    def test_inline_too_many_ops(self, make_client):
        client = make_client(max_ops=2)
        r = client.post("/v1/placements", json={"graph": tiny_graph()})
        assert r.status_code == 413 and "max_ops" in r.json()["detail"]

    def test_malformed_body(self, client):
        r = client.post("/v1/placements", content=b"{not json", headers={"content-type": "application/json"})
        assert r.status_code == 422

    def test_gzip_body_where_json_is_expected(self, client):
        """A gzip graph posted to /v1/placements (not to /v1/graphs) is a 422 that says so, not a 500."""
        body = gzip.compress(json.dumps(tiny_graph()).encode())
        r = client.post("/v1/placements", content=body, headers={"content-type": "application/gzip"})
        assert r.status_code == 422, r.text
        assert "not JSON" in r.text and "/v1/graphs" in r.text

    def test_unknown_placement(self, client):
        assert client.get("/v1/placements/p_nope").status_code == 404


class TestRL:
    def test_waits_then_answers_best_so_far(self, client, graph_id, monkeypatch):
        """method rl starts a job, waits, and answers its best placement and the job id."""
        monkeypatch.setenv("FAKE_TRAIN_STEP_TIME", "1e-9")  # faster than any real placement
        r = client.post("/v1/placements", json={"graph_id": graph_id, "cluster": "2gpu", "method": "rl",
                                                "budget_seconds": 0.5, "wait_seconds": 15})
        assert r.status_code == 201, r.text
        p = r.json()
        assert p["job_id"].startswith("j_") and p["job_state"] == "done"
        assert set(p["devices"]) == {"x", "mm", "out"} and p["step_time"] == 1e-9
        job = client.get(f"/v1/jobs/{p['job_id']}").json()
        assert job["result"]["devices"] == p["devices"]
        assert client.get(f"/v1/placements/{p['id']}").json()["step_time"] == 1e-9

    def test_a_job_slower_than_the_zero_shot_placement_never_replaces_it(self, client, graph_id, monkeypatch):
        """A short job can end slower than the policy's instant answer; POST and GET keep the faster one."""
        monkeypatch.setenv("FAKE_TRAIN_STEP_TIME", "10")
        r = client.post("/v1/placements", json={"graph_id": graph_id, "cluster": "2gpu", "method": "rl",
                                                "budget_seconds": 0.5, "wait_seconds": 15})
        p = r.json()
        assert r.status_code == 201 and p["job_state"] == "done"
        assert p["step_time"] < 10 and p["meta"]["training_steps"] == 0 and p["meta"]["policy"]["name"]
        job = client.get(f"/v1/jobs/{p['job_id']}").json()
        assert job["result"]["step_time"] == 10
        again = client.get(f"/v1/placements/{p['id']}").json()
        assert again["step_time"] == p["step_time"] and again["devices"] == p["devices"]

    def test_a_job_no_faster_than_the_zero_shot_placement_keeps_its_meta(self):
        """A job that found nothing faster holds the zero-shot answer itself: the answer keeps the policy's
        meta (steering, decoding), not the job's ``steps: 0``."""
        from service.api.routes.placements import _faster

        zero_shot = {"devices": {"x": "g0"}, "step_time": 0.5, "oom": False, "meta": {"training_steps": 0}}
        job = {"devices": {"x": "g0"}, "step_time": 0.5, "oom": False, "meta": {"steps": 0}}
        assert _faster(job, zero_shot) is zero_shot
        assert _faster({**job, "step_time": 0.4}, zero_shot)["step_time"] == 0.4

    def test_an_answer_from_the_job_follows_the_job_on_a_tie(self, client, graph_id, settings, monkeypatch):
        """POST answered the job's placement then; GET shows the job's latest, even when no faster (its final
        meta), not that snapshot."""
        monkeypatch.setenv("FAKE_TRAIN_STEP_TIME", "1e-9")
        p = client.post("/v1/placements", json={"graph_id": graph_id, "cluster": "2gpu", "method": "rl",
                                                "budget_seconds": 0.5, "wait_seconds": 15}).json()
        assert p["job_state"] == "done" and "training_steps" not in p["meta"]
        best = settings.jobs_dir / p["job_id"] / "best_placement.json"
        later = {**json.loads(best.read_text()), "meta": {"steps": 99}}  # the same placement, its job's final word
        best.write_text(json.dumps(later))
        assert client.get(f"/v1/placements/{p['id']}").json()["meta"] == {"steps": 99}

    def test_no_wait_answers_202_and_follows_the_job(self, client, graph_id):
        """With wait_seconds=0 the answer may come before any placement; GET follows the job."""
        r = client.post("/v1/placements", json={"graph_id": graph_id, "method": "rl", "budget_seconds": 0.5,
                                                "wait_seconds": 0})
        assert r.status_code in (201, 202)
        pid, job_id = r.json()["id"], r.json()["job_id"]
        wait_for(lambda: client.get(f"/v1/jobs/{job_id}").json()["state"] == "done")
        again = client.get(f"/v1/placements/{pid}").json()
        assert again["job_state"] == "done" and set(again["devices"]) == {"x", "mm", "out"}

    def test_baselines(self, client, graph_id, monkeypatch):
        """baselines=true answers every heuristic's step time beside the zero-shot answer, and keeps them on GET."""
        monkeypatch.setenv("FAKE_TRAIN_STEP_TIME", "1e-9")  # the job's placement replaces the first answer
        r = client.post("/v1/placements", json={"graph_id": graph_id, "cluster": "2gpu", "method": "rl",
                                                "baselines": True, "budget_seconds": 0.5, "wait_seconds": 0})
        assert r.status_code in (201, 202), r.text
        p = r.json()
        assert "metis" in p["baselines"] and "heft" in p["baselines"] and "rl" not in p["baselines"]
        wait_for(lambda: client.get(f"/v1/jobs/{p['job_id']}").json()["state"] == "done")
        again = client.get(f"/v1/placements/{p['id']}").json()
        assert again["step_time"] == 1e-9 and again["baselines"] == p["baselines"]

    def test_rl_options_reach_the_trainer(self, client, graph_id):
        """Trainer options of method rl become placer train flags."""
        r = client.post("/v1/placements", json={"graph_id": graph_id, "method": "rl", "budget_seconds": 60,
                                                "options": {"steps": 3, "samples": 8}, "wait_seconds": 15})
        job = client.get(f"/v1/jobs/{r.json()['job_id']}").json()
        assert job["state"] == "done" and job["options"] == {"steps": 3, "samples": 8, "init": "shipped"}
        assert job["progress"]["step"] == 3 and job["progress"]["samples"] == 24

    def test_rl_bad_options(self, client, graph_id):
        """Unknown or out-of-range trainer options are a 422 naming them."""
        r = client.post("/v1/placements", json={"graph_id": graph_id, "method": "rl", "options": {"lr": 1}})
        assert r.status_code == 422 and "lr" in r.json()["detail"]
        r = client.post("/v1/placements", json={"graph_id": graph_id, "method": "rl", "options": {"samples": 0}})
        assert r.status_code == 422 and "samples" in r.json()["detail"]

    def test_rl_bad_request_is_refused_before_any_placing(self, client, graph_id, monkeypatch):
        """Bad trainer options or an objective rl does not optimise are a 422 before the zero-shot placement
        and the baselines (up to best_seconds) are computed for nothing."""
        def ran(*args, **kwargs):
            raise AssertionError("placed before the request was checked")

        monkeypatch.setattr(placing, "zero_shot", ran)
        monkeypatch.setattr(placing, "baselines", ran)
        body = {"graph_id": graph_id, "method": "rl", "baselines": True}
        r = client.post("/v1/placements", json={**body, "options": {"lr": 1}})
        assert r.status_code == 422 and "lr" in r.json()["detail"]
        r = client.post("/v1/placements", json={**body, "objective": "memory"})
        assert r.status_code == 422 and "step_time only" in r.json()["detail"], r.text


class TestRefine:
    def test_a_refined_answer_is_never_slower_and_says_how_it_was_found(self, client, graph_id):
        """refine_seconds runs local search on the method's placement; baselines keep the unrefined times."""
        body = {"graph_id": graph_id, "cluster": "4gpu", "method": "round_robin", "baselines": True}
        plain = client.post("/v1/placements", json=body).json()
        r = client.post("/v1/placements", json={**body, "refine_seconds": 5})
        assert r.status_code == 201, r.text
        p = r.json()
        assert p["step_time"] <= plain["step_time"]
        assert p["meta"]["refined"]["start_step_time"] == pytest.approx(plain["step_time"])
        assert p["baselines"]["round_robin"] == plain["step_time"]
        assert client.get(f"/v1/placements/{p['id']}").json()["meta"]["refined"] == p["meta"]["refined"]

    def test_refine_sweeps_gives_the_same_answer_twice(self, client, graph_id):
        body = {"graph_id": graph_id, "cluster": "4gpu", "method": "round_robin", "refine_seconds": 60,
                "refine_sweeps": 2}
        first, second = (client.post("/v1/placements", json=body).json() for _ in range(2))
        assert first["devices"] == second["devices"] and first["meta"]["refined"]["sweeps"] <= 2

    @pytest.mark.parametrize("method", ["best", "rl"])
    def test_best_and_the_zero_shot_answer_are_refined_too(self, client, graph_id, method, monkeypatch):
        monkeypatch.setenv("FAKE_TRAIN_STEP_TIME", "10")  # the job never beats the instant answer
        r = client.post("/v1/placements", json={"graph_id": graph_id, "cluster": "2gpu", "method": method,
                                                "refine_seconds": 2, "budget_seconds": 0.5, "wait_seconds": 15})
        assert r.status_code == 201, r.text
        assert r.json()["step_time"] <= r.json()["meta"]["refined"]["start_step_time"]

    @pytest.mark.parametrize("extra, message", [
        ({"refine_seconds": -1}, "refine_seconds"),
        ({"refine_seconds": 61}, "refine_seconds"),
        ({"refine_seconds": 1, "objective": "throughput"}, "refine_seconds refines step time"),
        ({"refine_sweeps": 2}, "refine_sweeps needs refine_seconds"),
        ({"refine_seconds": 1, "refine_sweeps": 0}, "refine_sweeps"),
    ])
    def test_bad_refine_seconds(self, client, graph_id, heuristic, extra, message):
        r = client.post("/v1/placements", json={"graph_id": graph_id, "method": heuristic, **extra})
        assert r.status_code == 422 and message in str(r.json()["detail"])


class TestProperties:
    def test_any_valid_graph_is_placed(self, client):
        """Random valid DAGs, presets and methods: always 201, every op on a device of the cluster."""
        from hypothesis import HealthCheck, given, settings
        from hypothesis import strategies as st

        from placer import presets
        from placer.synthetic import layered_graph

        methods = registry.names(heuristic_only=True) + ["best"]

        @given(n=st.integers(1, 60), seed=st.integers(0, 2**16), cluster=st.sampled_from(["2gpu", "4gpu-nvlink",
               "local", "local:3"]), method=st.sampled_from(methods))
        @settings(max_examples=25, deadline=None, derandomize=True, database=None,
                  suppress_health_check=list(HealthCheck))
        def placed(n, seed, cluster, method):
            g = layered_graph(n, seed=seed).to_dict()
            r = client.post("/v1/placements", json={"graph": g, "cluster": cluster, "method": method})
            assert r.status_code == 201, r.text
            devices = set(presets.get(cluster).device_names)
            assert len(r.json()["devices"]) == n and set(r.json()["devices"].values()) <= devices

        placed()


class TestCandidates:
    def test_best_of_named_candidates(self, client, graph_id):
        """candidates restricts best to the named heuristics."""
        two = registry.names(heuristic_only=True)[:2]
        r = client.post("/v1/placements", json={"graph_id": graph_id, "method": "best", "candidates": two})
        assert r.status_code == 201 and list(r.json()["baselines"]) == two

    def test_unknown_candidate(self, client, graph_id):
        r = client.post("/v1/placements", json={"graph_id": graph_id, "method": "best", "candidates": ["zzz"]})
        assert r.status_code == 422 and "zzz" in r.json()["detail"]

    def test_learned_candidate_is_refused(self, client, graph_id):
        """rl trains for minutes: as a candidate of best (or a baseline) it would hold the request, so it is refused."""
        for body in ({"method": "best", "candidates": ["metis", "rl"]},
                     {"method": "metis", "baselines": True, "candidates": ["rl"]}):
            r = client.post("/v1/placements", json={"graph_id": graph_id, **body})
            assert r.status_code == 422 and "'rl' is learned" in r.json()["detail"], r.text

    @pytest.mark.parametrize("body", [{"method": "best"}, {"method": "metis", "baselines": True}])
    def test_no_candidates_is_an_error(self, client, graph_id, body):
        """An empty list names none: best said "no heuristic produced a placement: {}", baselines were {}."""
        r = client.post("/v1/placements", json={"graph_id": graph_id, "candidates": [], **body})
        assert r.status_code == 422 and r.json()["detail"].startswith("candidates is empty")

    def test_default_candidates_are_every_heuristic(self, client, graph_id):
        """By default best runs every heuristic, whatever it was built for, scored on the objective asked for."""
        r = client.post("/v1/placements", json={"graph_id": graph_id, "method": "best"})
        assert list(r.json()["baselines"]) == registry.names(heuristic_only=True)

    def test_budget_skips_the_rest(self, make_client):
        """Once best_seconds are spent the remaining heuristics are skipped, and said to be."""
        client = make_client(best_seconds=1e-9)
        gid = client.post("/v1/graphs", json=tiny_graph()).json()["id"]
        r = client.post("/v1/placements", json={"graph_id": gid, "method": "best"})
        p = r.json()
        assert r.status_code == 201 and len(p["meta"].get("skipped", {})) == len(p["baselines"]) - 1
        assert sum(t is not None for t in p["baselines"].values()) == 1


class TestClusterSpec:
    def test_every_preset_spec_posts_back_inline(self, client, graph_id):
        """The spec GET /v1/clusters answers for a preset is accepted inline and places as the preset does."""
        for preset in client.get("/v1/clusters").json()["data"]:
            by_name = client.post("/v1/placements", json={"graph_id": graph_id, "cluster": preset["name"],
                                                          "method": "round_robin"})
            inline = client.post("/v1/placements", json={"graph_id": graph_id, "cluster": preset["spec"],
                                                         "method": "round_robin"})
            assert inline.status_code == 201, (preset["name"], inline.text)
            assert inline.json()["step_time"] == by_name.json()["step_time"]
            assert inline.json()["devices"] == by_name.json()["devices"]

    def test_inline_topology(self, client, graph_id):
        """A topology spec is accepted inline; a bad one is a 422 naming the bad element."""
        spec = next(c["spec"] for c in client.get("/v1/clusters").json()["data"] if c["name"] == "dgx-a100")
        assert client.post("/v1/placements", json={"graph_id": graph_id, "cluster": spec,
                                                   "method": "round_robin"}).status_code == 201
        spec["topology"]["links"][0]["between"][1] = "nowhere"
        r = client.post("/v1/placements", json={"graph_id": graph_id, "cluster": spec, "method": "round_robin"})
        assert r.status_code == 422 and "unknown node 'nowhere'" in r.json()["detail"]
        spec["topology"]["wires"] = []
        r = client.post("/v1/placements", json={"graph_id": graph_id, "cluster": spec, "method": "round_robin"})
        assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "cluster", "topology", "wires"]

    def test_shared_threads_changes_the_simulation(self, client, graph_id):
        """shared_threads reaches the simulator: one thread for two devices serialises what two would overlap."""
        spec = next(c["spec"] for c in client.get("/v1/clusters").json()["data"] if c["spec"].get("shared_threads"))
        wide = {**spec, "shared_threads": 64}
        times = [client.post("/v1/placements", json={"graph": _parallel_graph(), "cluster": c,
                                                     "method": "round_robin"}).json()["step_time"]
                 for c in (spec, wide)]
        assert times[0] > times[1]

    @pytest.mark.parametrize("value", [0, -1, True, 1.5, "2"])
    def test_shared_threads_is_a_positive_integer(self, client, graph_id, value):
        """The same check as a cluster file: a positive integer, not a boolean, float or string."""
        spec = next(c["spec"] for c in client.get("/v1/clusters").json()["data"] if c["name"] == "local")
        r = client.post("/v1/placements", json={"graph_id": graph_id, "cluster": {**spec, "shared_threads": value}})
        assert r.status_code == 422
        assert [e["loc"] for e in r.json()["detail"]] == [["body", "cluster", "shared_threads"]]

    @pytest.mark.parametrize("value", [True, "1e12"])
    def test_device_numbers_are_numbers(self, client, graph_id, value):
        """As in a cluster file, a boolean or a string is not a number."""
        spec = next(c["spec"] for c in client.get("/v1/clusters").json()["data"] if c["name"] == "2gpu")
        spec["devices"][0]["peak_flops"] = value
        r = client.post("/v1/placements", json={"graph_id": graph_id, "cluster": spec})
        assert [e["loc"] for e in r.json()["detail"]] == [["body", "cluster", "devices", 0, "peak_flops"]]


def _parallel_graph() -> dict:
    """Two independent heavy matmuls: on two devices they can overlap."""
    return {"name": "parallel", "nodes": [
        {"name": "x", "op": "Placeholder", "output_bytes": 1000},
        {"name": "a", "op": "MatMul", "inputs": ["x"], "output_bytes": 1000, "flops": 1e10},
        {"name": "b", "op": "MatMul", "inputs": ["x"], "output_bytes": 1000, "flops": 1e10},
    ]}


class TestThroughput:
    @pytest.mark.parametrize("method", ["pipeline_dp", "best"])
    def test_max_load_is_answered_and_stored(self, client, graph_id, method):
        """A throughput placement answers max_load, as the CLI's --json does, and GET answers it again."""
        r = client.post("/v1/placements", json={"graph_id": graph_id, "cluster": "4gpu", "method": method,
                                                "objective": "throughput"})
        assert r.status_code == 201, r.text
        p = r.json()
        assert p["objective"] == "throughput" and p["max_load"] > 0
        assert client.get(f"/v1/placements/{p['id']}").json()["max_load"] == p["max_load"]

    def test_every_contract_field_is_answered(self):
        """PlacementPublic has a field for everything the Placement contract can hold."""
        from placer.placement import Placement
        from service.models import PlacementPublic

        full = Placement(graph="g", cluster="c", method="m", devices={}, step_time=1.0, lower_bound=0.5,
                         max_load=1.0, meta={"k": 1}).to_dict()
        assert set(full) <= set(PlacementPublic.model_fields)


def test_inline_cluster_device_limit(client, graph_id):
    """An inline cluster over MAX_DEVICES devices is refused before anything is allocated for it."""
    from service.models import MAX_DEVICES

    dev = {"kind": "cpu", "peak_flops": 1e12, "memory_bandwidth": 1e11, "memory_bytes": 1e10}
    cluster = {"name": "big", "default_link": {"bandwidth": 1e10},
               "devices": [{"name": f"d{i}", **dev} for i in range(MAX_DEVICES + 1)]}
    r = client.post("/v1/placements", json={"graph_id": graph_id, "cluster": cluster, "method": "best"})
    assert r.status_code == 422


class TestMalformedBodies:
    """Every malformed body is a 422 naming the problem (#41): invalid UTF-8 and deep nesting were a bare 400,
    a lone surrogate was accepted."""

    def _post(self, client, body: bytes):
        return client.post("/v1/placements", content=body, headers={"content-type": "application/json"})

    def test_lone_surrogate_in_an_inline_graph_names_the_op(self, client):
        body = json.dumps({"graph": tiny_graph(), "cluster": "2gpu", "method": "single"})
        r = self._post(client, body.replace('"mm"', '"m\\udfffm"', 1).encode())
        assert r.status_code == 422, r.text
        msg = r.json()["detail"][0]["msg"]
        assert "op 'm\\udfffm' (nodes[1]) name" in msg and "U+DFFF" in msg

    def test_lone_surrogate_elsewhere_names_the_field(self, client, graph_id):
        r = self._post(client, b'{"graph_id": "%s", "method": "single", "objective": "x\\ud800"}' % graph_id.encode())
        assert r.status_code == 422 and "objective" in r.json()["detail"][0]["msg"]

    def test_invalid_utf8(self, client):
        r = self._post(client, b'{"graph_id": "g_\xff"}')
        assert r.status_code == 422 and "not UTF-8: byte 16" in r.json()["detail"][0]["msg"]

    def test_deep_nesting(self, client):
        r = self._post(client, b"[" * 100_000 + b"]" * 100_000)
        assert r.status_code == 422 and "nested too deeply" in r.json()["detail"][0]["msg"]

    def test_an_integer_of_thousands_of_digits_is_refused_by_its_field(self, client, graph_id):
        """Python refuses to read integers of over 4,300 digits; the body's reader makes them infinite, which
        the field's own rule refuses (not finite, or over its limit)."""
        for field in ("seed", "refine_seconds"):
            r = self._post(client, b'{"graph_id": "%s", "method": "single", "%s": %s}'
                           % (graph_id.encode(), field.encode(), b"9" * 5000))
            assert r.status_code == 422, r.text
            assert r.json()["detail"][0]["loc"] == ["body", field]

    def test_not_json_says_where(self, client):
        r = self._post(client, b'{"graph_id": }')
        assert r.status_code == 422 and "line 1 column 14" in r.json()["detail"][0]["msg"]

    def test_large_bodies_are_parsed_in_a_parse_process(self, make_client, graph_id):
        """Over parse_in_process_bytes the body goes to a parse process: same answers, errors included."""
        client = make_client(parse_in_process_bytes=0)
        graph_id = client.post("/v1/graphs", json=tiny_graph()).json()["id"]
        ok = client.post("/v1/placements", json={"graph": tiny_graph(), "cluster": "2gpu", "method": "single"})
        assert ok.status_code == 201 and set(ok.json()["devices"]) == {"x", "mm", "out"}, ok.text
        bad = client.post("/v1/placements", json={"graph_id": graph_id, "baselines": "yes"})
        assert bad.status_code == 422 and bad.json()["detail"][0]["loc"] == ["body", "baselines"]
        cyclic = tiny_graph()
        cyclic["nodes"][0]["inputs"] = ["out"]
        r = client.post("/v1/placements", json={"graph": cyclic, "method": "single"})
        assert r.status_code == 422 and "cycle" in r.json()["detail"]
        assert client.get(f"/v1/graphs/{graph_id}").status_code == 200
