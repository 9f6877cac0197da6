"""Routes /v1/jobs: start, follow, list, cancel (process management with the fake trainer)."""

from __future__ import annotations

import errno
from pathlib import Path

from placer.synthetic import layered_graph
from tests.service.conftest import gz, tiny_graph, wait_for


def _job(client, job_id):
    return client.get(f"/v1/jobs/{job_id}").json()


class TestJobs:
    def test_start_follow_finish(self, client, graph_id):
        """A job runs in its own process; GET shows progress, then the result when done."""
        r = client.post("/v1/jobs", json={"graph_id": graph_id, "cluster": "2gpu", "budget_seconds": 0.5, "seed": 3})
        assert r.status_code == 201, r.text
        job = r.json()
        assert job["state"] in ("queued", "running") and job["seed"] == 3 and job["graph_name"] == "tiny"
        done = wait_for(lambda: (j := _job(client, job["id"]))["state"] == "done" and j)
        assert done["progress"]["step"] >= 1 and done["progress"]["best_step_time"] > 0
        assert done["progress"]["elapsed_seconds"] >= 0.5
        assert set(done["result"]["devices"]) == {"x", "mm", "out"}
        assert done["attempts"] == 1 and done["error"] is None

    def test_options(self, client, graph_id):
        """Trainer options are stored with the job and passed as flags."""
        job = client.post("/v1/jobs", json={"graph_id": graph_id, "budget_seconds": 60,
                                            "options": {"steps": 2, "warm_start": "none"}}).json()
        assert job["options"] == {"steps": 2, "warm_start": "none"}
        wait_for(lambda: _job(client, job["id"])["state"] == "done")
        assert client.post("/v1/jobs", json={"graph_id": graph_id, "options": {"warm_start": "hot"}}).status_code == 422

    def test_refined_result_is_answered_when_faster(self, client, graph_id):
        """Option refine_seconds becomes --refine-seconds; the refined placement it writes is the job's result."""
        job = client.post("/v1/jobs", json={"graph_id": graph_id, "budget_seconds": 60,
                                            "options": {"steps": 2, "refine_seconds": 1.5, "refine_sweeps": 3}}).json()
        assert job["options"] == {"steps": 2, "refine_seconds": 1.5, "refine_sweeps": 3}
        done = wait_for(lambda: (j := _job(client, job["id"]))["state"] == "done" and j)
        assert done["result"]["meta"]["refined"]["max_sweeps"] == 3  # passed on as --refine-sweeps
        assert done["result"]["step_time"] == done["progress"]["best_step_time"] / 2
        for bad in ({"refine_seconds": 0}, {"refine_seconds": 61}, {"refine_sweeps": 3}):
            r = client.post("/v1/jobs", json={"graph_id": graph_id, "options": bad})
            assert r.status_code == 422 and "refine_s" in str(r.json()["detail"])

    def test_warm_start_search_is_passed_on_and_checked(self, client, graph_id):
        options = {"steps": 1, "warm_start_search": 2, "init": "none"}
        job = client.post("/v1/jobs", json={"graph_id": graph_id, "options": options})
        assert job.status_code == 201 and job.json()["options"] == options
        wait_for(lambda: _job(client, job.json()["id"])["state"] == "done")
        for bad in ({"warm_start_search": -1}, {"warm_start_search": 2, "warm_start": "none", "init": "none"},
                    {"warm_start_search": 2, "init": "shipped"}, {"warm_start_search": 2}):
            r = client.post("/v1/jobs", json={"graph_id": graph_id, "options": bad})
            assert r.status_code == 422 and "warm_start_search" in str(r.json()["detail"])

    def test_starts_is_passed_on_and_checked(self, client, graph_id):
        job = client.post("/v1/jobs", json={"graph_id": graph_id, "options": {"steps": 4, "starts": 2}})
        assert job.status_code == 201 and job.json()["options"] == {"steps": 4, "starts": 2}
        done = wait_for(lambda: (j := _job(client, job.json()["id"]))["state"] == "done" and j)
        assert done["progress"]["step"] == 4
        for bad in ({"starts": 0}, {"starts": 9}, {"starts": 2, "warm_start": "none"}, {"starts": 2, "init": "shipped"}):
            r = client.post("/v1/jobs", json={"graph_id": graph_id, "options": bad})
            assert r.status_code == 422 and "starts" in str(r.json()["detail"])

    def test_inline_graph(self, client):
        r = client.post("/v1/jobs", json={"graph": tiny_graph("inline"), "budget_seconds": 0.2})
        assert r.status_code == 201 and r.json()["graph_id"] is None and r.json()["graph_name"] == "inline"

    def test_cancel(self, client, graph_id):
        """DELETE sends SIGTERM; the job checkpoints and ends cancelled."""
        job = client.post("/v1/jobs", json={"graph_id": graph_id, "budget_seconds": 60}).json()
        wait_for(lambda: (_job(client, job["id"])["progress"] or {}).get("step", 0) >= 1)
        r = client.delete(f"/v1/jobs/{job['id']}")
        assert r.status_code == 202 and r.json()["state"] == "cancelling"
        wait_for(lambda: _job(client, job["id"])["state"] == "cancelled")
        assert client.delete(f"/v1/jobs/{job['id']}").json()["state"] == "cancelled"

    def test_queue_and_cancel_queued(self, client, graph_id):
        """Over max_running_jobs a job waits queued; cancelling it never starts it."""
        first = client.post("/v1/jobs", json={"graph_id": graph_id, "budget_seconds": 60}).json()
        second = client.post("/v1/jobs", json={"graph_id": graph_id, "budget_seconds": 60}).json()
        assert second["state"] == "queued"
        assert client.delete(f"/v1/jobs/{second['id']}").json()["state"] == "cancelled"
        assert [j["id"] for j in client.get("/v1/jobs?state=running").json()["data"]] == [first["id"]]
        client.delete(f"/v1/jobs/{first['id']}")

    def test_list(self, client, graph_id):
        ids = [client.post("/v1/jobs", json={"graph_id": graph_id, "budget_seconds": 0.1}).json()["id"]
               for _ in range(2)]
        assert [j["id"] for j in client.get("/v1/jobs").json()["data"]] == ids
        wait_for(lambda: all(_job(client, i)["state"] == "done" for i in ids))
        assert all(j["result"] is None for j in client.get("/v1/jobs").json()["data"])
        assert all(j["result"]["devices"] for j in client.get("/v1/jobs?include_result=true").json()["data"])

    def test_errors(self, client, graph_id):
        """Unknown ids are 404; bad budgets, clusters and states are 422."""
        assert client.get("/v1/jobs/j_nope").status_code == 404
        assert client.delete("/v1/jobs/j_nope").status_code == 404
        assert client.post("/v1/jobs", json={"graph_id": "g_nope"}).status_code == 404
        assert client.post("/v1/jobs", json={"graph_id": graph_id, "budget_seconds": 0}).status_code == 422
        assert client.post("/v1/jobs", json={"graph_id": graph_id, "seed": -1}).status_code == 422
        r = client.post("/v1/jobs", json={"graph_id": graph_id, "cluster": "nope"})
        assert r.status_code == 422 and "nope" in r.json()["detail"]
        assert client.get("/v1/jobs?state=sleeping").status_code == 422


def test_queue_full_is_429(make_client):
    """Past max_queued_jobs waiting, new jobs (and rl placements) are refused with 429 and a Retry-After."""
    client = make_client(max_queued_jobs=1)
    gid = client.post("/v1/graphs", json=tiny_graph()).json()["id"]
    running = client.post("/v1/jobs", json={"graph_id": gid, "budget_seconds": 60}).json()
    queued = client.post("/v1/jobs", json={"graph_id": gid, "budget_seconds": 60}).json()
    assert queued["state"] == "queued"
    r = client.post("/v1/jobs", json={"graph_id": gid})
    assert r.status_code == 429 and "max_queued_jobs" in r.json()["detail"]
    assert 1 <= int(r.headers["Retry-After"]) <= 60  # until the running job's 60 s budget is spent
    placing = client.post("/v1/placements", json={"graph_id": gid, "method": "rl"})
    assert placing.status_code == 429 and 1 <= int(placing.headers["Retry-After"]) <= 60
    for job in (queued, running):
        client.delete(f"/v1/jobs/{job['id']}")


def test_a_queue_filled_after_the_early_check_is_still_429(make_client, monkeypatch):
    """Requests checked the queue, then stored their jobs: several at once all passed the check and
    together queued past max_queued_jobs. The job that would pass the limit is refused, its folder gone."""
    from service.jobs import JobRunner

    client = make_client(max_queued_jobs=1)
    gid = client.post("/v1/graphs", json=tiny_graph()).json()["id"]
    running = client.post("/v1/jobs", json={"graph_id": gid, "budget_seconds": 60}).json()
    queued = client.post("/v1/jobs", json={"graph_id": gid, "budget_seconds": 60}).json()
    monkeypatch.setattr(JobRunner, "check_capacity", lambda self: None)  # as if checked before `queued` was
    r = client.post("/v1/jobs", json={"graph_id": gid})
    assert r.status_code == 429 and "max_queued_jobs" in r.json()["detail"]
    assert 1 <= int(r.headers["Retry-After"]) <= 60  # until the running job's 60 s budget is spent
    placing = client.post("/v1/placements", json={"graph_id": gid, "method": "rl"})
    assert placing.status_code == 429 and 1 <= int(placing.headers["Retry-After"]) <= 60
    jobs = client.get("/v1/jobs").json()["data"]
    assert sorted(j["id"] for j in jobs) == sorted([running["id"], queued["id"]])
    job_dirs = Path(client.app.state.settings.jobs_dir)
    assert sorted(p.name for p in job_dirs.iterdir() if p.is_dir()) == sorted([running["id"], queued["id"]])
    for job in (queued, running):
        client.delete(f"/v1/jobs/{job['id']}")


class TestDiskFull:
    def test_full_database_is_507(self, client):
        """A write to a full database is a 507 saying so (was a 500 'internal error'); what was stored stays."""
        big = layered_graph(2000).to_dict()
        graph_id = client.post("/v1/graphs", content=gz(big)).json()["id"]
        db = client.app.state.storage._db
        db.execute(f"PRAGMA max_page_count = {db.execute('PRAGMA page_count').fetchone()[0]}")  # as a full disk
        r = client.post("/v1/graphs", content=gz(big))
        assert r.status_code == 507 and "disk is full" in r.json()["detail"], r.text
        r = client.post("/v1/placements", json={"graph_id": graph_id, "cluster": "2gpu", "method": "round_robin"})
        assert r.status_code == 507, r.text
        assert client.get(f"/v1/graphs/{graph_id}").json()["num_ops"] == 2000
        assert client.get("/v1/placements").json()["count"] == 0

    def test_full_disk_for_job_files_is_507(self, client, graph_id, monkeypatch):
        """No room for a job's input files: a 507, and no half-written job folder is left behind."""
        def full(*args, **kwargs):
            raise OSError(errno.ENOSPC, "No space left on device")
        monkeypatch.setattr("service.jobs.write_atomic", full)
        r = client.post("/v1/jobs", json={"graph_id": graph_id, "budget_seconds": 1})
        assert r.status_code == 507 and "No space left on device" in r.json()["detail"]
        assert list((client.app.state.settings.jobs_dir).glob("j_*")) == []
