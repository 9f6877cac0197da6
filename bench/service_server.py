"""A `placer serve` on loopback for the service benchmarks, and their latency summaries."""

from __future__ import annotations

import os
import signal
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np


def summary(values: list[float]) -> dict[str, float]:
    """Latency figures in ms; p99 by nearest rank (a measured latency, never an interpolated one)."""
    if not values:
        return {"n": 0}
    return {"n": len(values), "p50_ms": 1e3 * statistics.median(values),
            "p99_ms": 1e3 * float(np.percentile(values, 99, method="inverted_cdf")), "max_ms": 1e3 * max(values)}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(data_dir: Path, port: int, train_command: str | None, workers: int = 1,
                 keys: dict[str, str] | None = None) -> subprocess.Popen:
    """`placer serve` on loopback; `keys` sets PLACER_API_KEYS / PLACER_ADMIN_KEY (default: none)."""
    import httpx2 as httpx

    env = {**os.environ, "PLACER_BUNDLED_GRAPHS_DIR": "", "TF_CPP_MIN_LOG_LEVEL": "3"}
    env.pop("PLACER_API_KEYS", None)
    env.pop("PLACER_ADMIN_KEY", None)
    env.update(keys or {})
    if train_command:
        env["PLACER_TRAIN_COMMAND"] = train_command
    proc = subprocess.Popen(
        [sys.executable, "-m", "placer.cli.main", "serve", "--host", "127.0.0.1", "--port", str(port),
         "--data-dir", str(data_dir), "--log-level", "warning", "--workers", str(workers)],
        env=env, stdout=subprocess.DEVNULL, stderr=open(data_dir / "server.log", "wb"),
    )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"server exited; see {data_dir / 'server.log'}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                return proc
        except httpx.HTTPError:
            time.sleep(0.2)
    proc.kill()
    raise SystemExit("server did not come up within 120 s")


def stop_server(server: subprocess.Popen) -> None:
    """SIGTERM, as a user's Ctrl-C would; killed if it has not stopped within a minute."""
    server.send_signal(signal.SIGTERM)
    try:
        server.wait(timeout=60)
    except subprocess.TimeoutExpired:
        server.kill()
