"""Fixtures for the service tests: settings on a temporary data dir, a client, small graphs."""

from __future__ import annotations

import gzip
import json
import sys
import time
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest
from fastapi.testclient import TestClient

from service.core.config import Settings
from service.main import create_app

FAKE_TRAIN = [sys.executable, str(Path(__file__).with_name("fake_train.py"))]


def tiny_graph(name: str = "tiny") -> dict[str, Any]:
    """Three ops in a chain, in the graph file format."""
    return {"name": name, "nodes": [
        {"name": "x", "op": "Placeholder", "output_shapes": [[32, 784]], "output_bytes": 100352},
        {"name": "mm", "op": "MatMul", "inputs": ["x"], "output_bytes": 1280, "flops": 501760,
         "param_bytes": 31360},
        {"name": "out", "op": "Softmax", "inputs": ["mm"], "output_bytes": 1280, "flops": 640},
    ]}


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    """Settings on a fresh data dir, training with the fake train command."""
    return Settings(data_dir=tmp_path / "data", train_command=FAKE_TRAIN, job_poll_seconds=0.05,
                    job_stop_seconds=5.0, max_upload_bytes=1_000_000, max_inflated_bytes=4_000_000,
                    max_ops=5000, bundled_graphs_dir=None, warm_up=False)


@pytest.fixture
def hold(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A file that keeps the fake trainer's runs going past their budget while it exists (FAKE_TRAIN_HOLD, in
    the environment of the job processes and servers the test starts): the test stops, crashes or cancels a
    run before it ends however slow the machine, then unlinks it to let runs end. Unlinked at teardown too,
    so a run a failed test left behind still ends at its budget."""
    path = tmp_path / "hold"
    path.touch()
    monkeypatch.setenv("FAKE_TRAIN_HOLD", str(path))
    yield path
    path.unlink(missing_ok=True)


@pytest.fixture
def make_client(settings: Settings) -> Iterator[Callable[..., TestClient]]:
    """Factory of started in-process clients (settings overridable per test)."""
    opened: list[TestClient] = []

    def make(**overrides: Any) -> TestClient:
        s = settings.model_copy(update=overrides) if overrides else settings
        client = TestClient(create_app(s))
        client.__enter__()
        opened.append(client)
        return client

    yield make
    for client in reversed(opened):
        client.__exit__(None, None, None)


@pytest.fixture
def client(make_client: Callable[..., TestClient]) -> TestClient:
    return make_client()


@pytest.fixture
def graph_id(client: TestClient) -> str:
    """Id of the tiny graph, uploaded."""
    r = client.post("/v1/graphs", json=tiny_graph())
    assert r.status_code == 201, r.text
    return r.json()["id"]


def gz(obj: Any) -> bytes:
    return gzip.compress(json.dumps(obj).encode())


def wait_for(predicate: Callable[[], Any], timeout: float = 20.0, every: float = 0.05) -> Any:
    """Poll until `predicate` returns something truthy; fail the test after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(every)
    raise AssertionError(f"condition not met within {timeout} s")
