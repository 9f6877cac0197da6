"""method rl in the service: the shipped policy's zero-shot placement at once, then the job's."""

import logging

from placer.rl.saved_policy import load_policy
from service import placing
from tests.service.conftest import wait_for


def test_rl_answers_the_zero_shot_placement_at_once(client, graph_id):
    r = client.post("/v1/placements", json={"graph_id": graph_id, "cluster": "2gpu", "method": "rl",
                                            "budget_seconds": 0.5})
    assert r.status_code == 201, r.text
    p = r.json()
    assert set(p["devices"]) == {"x", "mm", "out"} and p["method"] == "rl" and p["step_time"] > 0
    policy = p["meta"]["policy"]
    assert policy["name"] and policy["version"] and policy["fine_tuned"] is False
    assert p["meta"]["training_steps"] == 0 and p["job_id"]
    # the job goes on; GET answers its placement once it has one
    wait_for(lambda: client.get(f"/v1/jobs/{p['job_id']}").json()["state"] == "done")
    again = client.get(f"/v1/placements/{p['id']}").json()
    assert again["job_state"] == "done" and set(again["devices"]) == {"x", "mm", "out"}


def test_rl_option_steer_steers_the_zero_shot_answer_and_the_job_starts_from_it(client, graph_id):
    r = client.post("/v1/placements", json={"graph_id": graph_id, "cluster": "2gpu", "method": "rl",
                                            "budget_seconds": 0.5, "options": {"steer": True}})
    assert r.status_code == 201, r.text
    assert r.json()["meta"]["steered"]["unsteered_step_time"] >= r.json()["step_time"]
    job = _finished_job(client, r)
    assert job["options"] == {"init": "shipped", "steer": True} and job["state"] == "done", job.get("error")
    for options in ({"steer": True, "init": "none"}, {"steer": True, "starts": 2}, {"steer": 1}):
        r = client.post("/v1/placements", json={"graph_id": graph_id, "method": "rl", "options": options})
        assert r.status_code == 422 and "steer" in r.json()["detail"], (options, r.text)


def _finished_job(client, placement):
    job_id = placement.json()["job_id"]
    return wait_for(lambda: (j := client.get(f"/v1/jobs/{job_id}").json())["state"] in ("done", "failed") and j)


def test_rl_job_fine_tunes_the_shipped_policy_unless_told_not_to(client, graph_id):
    """The job starts from the policy whose answer the user already has; init 'none' trains from scratch."""
    for options, job_options in (({}, {"init": "shipped"}), ({"init": "shipped"}, {"init": "shipped"}),
                                 ({"init": "none"}, {"init": "none"}), ({"starts": 2}, {"starts": 2})):
        r = client.post("/v1/placements", json={"graph_id": graph_id, "method": "rl", "budget_seconds": 0.5,
                                                "options": options})
        assert r.status_code == 201, r.text
        job = _finished_job(client, r)
        assert job["options"] == job_options and job["state"] == "done", (options, job)
    r = client.post("/v1/placements", json={"graph_id": graph_id, "method": "rl", "options": {"init": "mine"}})
    assert r.status_code == 422 and "init" in r.json()["detail"]


def test_rl_job_trains_from_scratch_where_the_policy_cannot_place(client, graph_id):
    """More devices than the shipped policy addresses: no zero-shot answer, so nothing to fine-tune."""
    most = max(member.weights["dev_slot"].shape[0] for member in load_policy().members)
    spec = next(c["spec"] for c in client.get("/v1/clusters").json()["data"] if c["name"] == "2gpu-flat")
    gpu = next(d for d in spec["devices"] if d["kind"] == "gpu")
    spec = {**spec, "name": "wide", "links": [],
            "devices": [{**gpu, "name": f"/device:GPU:{i}"} for i in range(most + 1)]}
    r = client.post("/v1/placements", json={"graph_id": graph_id, "cluster": spec, "method": "rl",
                                            "budget_seconds": 0.5, "wait_seconds": 0})
    assert r.status_code in (201, 202), r.text
    job = _finished_job(client, r)
    assert job["options"] == {"init": "none"} and job["state"] == "done", job


def test_the_service_warms_up_in_the_background(make_client, caplog):
    """With warm_up on, start-up places a small graph in the background (compiling the kernels a first answer
    needs) and says so; a failure there is logged, never fatal."""
    caplog.set_level(logging.INFO, logger="placer.service")
    client = make_client(warm_up=True)
    wait_for(lambda: any(r.getMessage().startswith("warmed up in") for r in caplog.records), timeout=120)
    assert client.get("/healthz").status_code == 200


def test_a_failed_warm_up_is_logged_not_raised(monkeypatch, caplog):
    def broken(*args, **kwargs):
        raise RuntimeError("no kernels today")

    monkeypatch.setattr(placing, "zero_shot", broken)
    caplog.set_level(logging.INFO, logger="placer.service")
    placing.warm_up()
    assert any("warming up failed" in r.getMessage() for r in caplog.records)


def test_the_shipped_policy_is_read_once_not_per_request(monkeypatch):
    """Reading the policy parses ~50 array headers with ast.literal_eval, and CPython 3.11's AST constructor
    shares its recursion counter between threads: reads in two threads at once (two rl requests, or the
    warm-up beside pytest's rewriting imports) failed with 'SystemError: AST constructor recursion depth
    mismatch' (#41, the fuzz test's flake). Requests at once share one read."""
    import threading

    from placer.presets import get
    from placer.synthetic import layered_graph
    import placer.rl.saved_policy as saved

    reads = []
    real = saved.load_policy

    def counted(*args, **kwargs):
        reads.append(threading.current_thread().name)
        return real(*args, **kwargs)

    monkeypatch.setattr(saved, "load_policy", counted)
    monkeypatch.setattr(placing, "_policy", None)
    graph, cluster = layered_graph(30, seed=0), get("2gpu")
    threads = [threading.Thread(target=placing.zero_shot, args=(graph, cluster)) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    placing.zero_shot(graph, cluster)
    assert len(reads) == 1
