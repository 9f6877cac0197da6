"""method rl in the service: the shipped policy's zero-shot placement at once, then the job's."""

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


def test_rl_job_can_fine_tune_the_shipped_policy(client, graph_id):
    r = client.post("/v1/placements", json={"graph_id": graph_id, "method": "rl", "budget_seconds": 0.5,
                                            "options": {"init": "shipped"}})
    assert r.status_code == 201, r.text
    job_id = r.json()["job_id"]
    job = wait_for(lambda: (j := client.get(f"/v1/jobs/{job_id}").json())["state"] in ("done", "failed") and j)
    assert job["options"] == {"init": "shipped"} and job["state"] == "done", job["error"]
    r = client.post("/v1/placements", json={"graph_id": graph_id, "method": "rl", "options": {"init": "mine"}})
    assert r.status_code == 422 and "init" in r.json()["detail"]
