"""A real server: `placer serve` under uvicorn on a loopback port, stopped, crashed and restarted.

Uploads a graph, gets a placement and starts a training job (the fake
trainer), then restarts the server (graceful stop, then kill -9) and finds
the graph, the placement and the job again, the job resumed to the end.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time

import httpx2 as httpx
import pytest

from tests.service.conftest import FAKE_TRAIN, gz, tiny_graph, wait_for


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """`placer serve` in a child process, on a loopback port and a data dir."""

    def __init__(self, data_dir, port):
        self.data_dir, self.port = data_dir, port
        self.url = f"http://127.0.0.1:{port}"
        self.proc: subprocess.Popen | None = None

    def start(self) -> str:
        env = {**os.environ, "PLACER_TRAIN_COMMAND": " ".join(FAKE_TRAIN), "PLACER_JOB_POLL_SECONDS": "0.05",
               "PLACER_JOB_STOP_SECONDS": "5", "PLACER_BUNDLED_GRAPHS_DIR": ""}
        env.pop("PLACER_API_KEYS", None)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "placer.cli.main", "serve", "--port", str(self.port),
             "--data-dir", str(self.data_dir), "--log-level", "warning"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
        )
        first = self.proc.stdout.readline()
        wait_for(self._up, timeout=60, every=0.1)
        return first

    def _up(self) -> bool:
        try:
            return httpx.get(f"{self.url}/healthz", timeout=1).status_code == 200
        except httpx.HTTPError:
            if self.proc.poll() is not None:
                raise AssertionError(f"server exited: {self.proc.stdout.read()}")
            return False

    def stop(self, sig=signal.SIGTERM) -> None:
        self.proc.send_signal(sig)
        self.proc.wait(timeout=30)
        self.proc.stdout.close()


@pytest.fixture
def server(tmp_path):
    srv = Server(tmp_path / "data", _free_port())
    yield srv
    if srv.proc is not None and srv.proc.poll() is None:
        srv.stop(signal.SIGKILL)


def test_restart_keeps_graphs_placements_and_jobs(server):
    """Nothing stored is lost across a graceful restart or a crash; jobs resume."""
    banner = server.start()
    assert f"http://127.0.0.1:{server.port}" in banner
    c = httpx.Client(base_url=server.url, timeout=30)
    graph_id = c.post("/v1/graphs", content=gz(tiny_graph())).json()["id"]
    placement = c.post("/v1/placements", json={"graph_id": graph_id, "cluster": "2gpu", "method": "best"}).json()
    job = c.post("/v1/jobs", json={"graph_id": graph_id, "budget_seconds": 1.5}).json()
    wait_for(lambda: (c.get(f"/v1/jobs/{job['id']}").json()["progress"] or {}).get("step", 0) >= 2)

    server.stop(signal.SIGTERM)  # graceful: the job checkpoints and is queued to resume
    server.start()
    assert c.get(f"/v1/graphs/{graph_id}").json()["num_ops"] == 3
    assert c.get(f"/v1/placements/{placement['id']}").json()["devices"] == placement["devices"]
    done = wait_for(lambda: (j := c.get(f"/v1/jobs/{job['id']}").json())["state"] == "done" and j)
    assert done["attempts"] == 2 and done["result"] is not None

    crashed = c.post("/v1/jobs", json={"graph_id": graph_id, "budget_seconds": 2.0}).json()
    wait_for(lambda: (c.get(f"/v1/jobs/{crashed['id']}").json()["progress"] or {}).get("step", 0) >= 2)
    server.stop(signal.SIGKILL)  # a crash: the job is left "running" in the database
    server.start()
    assert c.get(f"/v1/jobs/{crashed['id']}").json()["state"] in ("queued", "running", "done")
    done = wait_for(lambda: (j := c.get(f"/v1/jobs/{crashed['id']}").json())["state"] == "done" and j)
    assert done["attempts"] == 2
    assert [g["id"] for g in c.get("/v1/graphs").json()["data"]] == [graph_id]
    c.close()
