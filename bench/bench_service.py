"""Benchmark: the REST service through a real uvicorn server on loopback.

Prints measured figures and writes them to bench/results/service.json.

1. Latency of ``POST /v1/placements`` (one heuristic, a stored graph) for
   graphs/inception_v3.json.gz and a 10k-op synthetic graph
   (`placer.synthetic.layered_graph(10000)`): p50 / p99 / max over N requests
   made one after another, measured at the client (HTTP + JSON + placing +
   simulating). Then ``method: rl`` for inception_v3 (the shipped policy's answer at once), 5 requests with
   no job training and 5 beside a training job: a job runs nicer than the service
   (``PLACER_JOB_NICENESS``), so the second should be close to the first.
2. A load run (after a short warm-up so every worker has parsed the graph):
   C concurrent clients for S seconds, each looping over a mix
   of placements (70%, Inception-V3) and gzip graph uploads (30%, 200-op
   graphs), while a training job runs in the service: requests served,
   errors, p50 / p99 per kind.

The training job is ``placer train`` when the CLI has it; otherwise the run
says so and uses ``--train-command`` (nothing is trained silently in its place).

Run: .venv/bin/python -m bench.bench_service [--quick] [--clients 20] [--load-seconds 60] [--workers N]
     [--skip-latency]
Loopback only; bounded in requests (--requests) and time (--load-seconds).
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import json
import os
import random
import shlex
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = Path(__file__).parent / "results"


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile (nearest rank) of `values`."""
    ordered = sorted(values)
    k = max(0, min(len(ordered) - 1, int(round(q / 100 * len(ordered) + 0.5)) - 1))
    return ordered[k]


def summary(values: list[float]) -> dict[str, float]:
    if not values:
        return {"n": 0}
    return {"n": len(values), "p50_ms": 1e3 * statistics.median(values), "p99_ms": 1e3 * percentile(values, 99),
            "max_ms": 1e3 * max(values)}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def has_train_command() -> bool:
    from placer.cli.main import COMMANDS

    return "train" in COMMANDS


def start_server(data_dir: Path, port: int, train_command: str | None, workers: int = 1) -> subprocess.Popen:
    import httpx2 as httpx

    env = {**os.environ, "PLACER_BUNDLED_GRAPHS_DIR": "", "TF_CPP_MIN_LOG_LEVEL": "3"}
    env.pop("PLACER_API_KEYS", None)
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


def upload(client, graph) -> str:
    body = gzip.compress(json.dumps(graph.to_dict(), separators=(",", ":")).encode())
    r = client.post("/v1/graphs", content=body, headers={"content-type": "application/gzip"})
    r.raise_for_status()
    return r.json()["id"]


def latency(client, graph_id: str, method: str, cluster: str, n: int) -> dict:
    """n placements one after another; the first (warm-up) is reported apart."""
    times, step_time = [], None
    for k in range(n + 1):
        t0 = time.perf_counter()
        r = client.post("/v1/placements", json={"graph_id": graph_id, "cluster": cluster, "method": method})
        dt = time.perf_counter() - t0
        r.raise_for_status()
        step_time = r.json()["step_time"]
        if k == 0:
            first = dt
        else:
            times.append(dt)
    return {"first_ms": 1e3 * first, **summary(times), "step_time": step_time}


def wait_job(client, job_id: str, until) -> dict:
    """Poll a job until `until(job)` holds (10 minutes at most)."""
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        job = client.get(f"/v1/jobs/{job_id}").json()
        if until(job):
            return job
        time.sleep(0.2)
    raise SystemExit(f"job {job_id} did not get there within 10 minutes: {job}")


def rl_latency(client, graph_id: str, cluster: str, n: int) -> dict:
    """``method: rl`` answers (the shipped policy's zero-shot placement; each request also starts a 1 s
    fine-tuning job), n with no job training (each waits for the job the one before started to end) and n
    beside a training job (started first and seen past its first step; their own jobs queue behind it)."""
    def ask() -> tuple[float, str]:
        t0 = time.perf_counter()
        r = client.post("/v1/placements", json={"graph_id": graph_id, "cluster": cluster, "method": "rl",
                                                "budget_seconds": 1})
        dt = time.perf_counter() - t0
        r.raise_for_status()
        return dt, r.json()["job_id"]

    from service.jobs import FINISHED

    idle = []
    for _ in range(n):
        dt, job_id = ask()
        idle.append(dt)
        wait_job(client, job_id, lambda j: j["state"] in FINISHED)
    r = client.post("/v1/jobs", json={"graph_id": graph_id, "cluster": cluster, "budget_seconds": 300})
    r.raise_for_status()
    trainer = r.json()["id"]
    wait_job(client, trainer, lambda j: (j.get("progress") or {}).get("step", 0) >= 1)
    beside, queued = [], []
    for _ in range(n):
        dt, job_id = ask()
        beside.append(dt)
        queued.append(job_id)
    for job_id in [trainer, *queued]:
        client.delete(f"/v1/jobs/{job_id}")
    for job_id in [trainer, *queued]:
        wait_job(client, job_id, lambda j: j["state"] in FINISHED)
    return {"idle": summary(idle), "beside_a_job": summary(beside)}


async def load_run(url: str, place_graph_id: str, clients: int, seconds: float, method: str, cluster: str,
                   upload_bodies: list[bytes]) -> dict:
    """`clients` loops of mixed requests for `seconds`; every failure is counted, none retried."""
    import httpx2 as httpx

    lat: dict[str, list[float]] = {"placement": [], "upload": []}
    errors: dict[str, int] = {}
    deadline = time.monotonic() + seconds

    async def one_client(k: int) -> None:
        rng = random.Random(k)
        async with httpx.AsyncClient(base_url=url, timeout=120) as c:
            while time.monotonic() < deadline:
                kind = "placement" if rng.random() < 0.7 else "upload"
                t0 = time.perf_counter()
                try:
                    if kind == "placement":
                        r = await c.post("/v1/placements", json={"graph_id": place_graph_id, "cluster": cluster,
                                                                 "method": method})
                    else:
                        r = await c.post("/v1/graphs", content=rng.choice(upload_bodies),
                                         headers={"content-type": "application/gzip"})
                    ok = r.status_code < 300
                    tag = f"{kind} HTTP {r.status_code}"
                except httpx.HTTPError as e:
                    ok, tag = False, f"{kind} {type(e).__name__}"
                if ok:
                    lat[kind].append(time.perf_counter() - t0)
                else:
                    errors[tag] = errors.get(tag, 0) + 1

    t0 = time.monotonic()
    await asyncio.gather(*(one_client(k) for k in range(clients)))
    wall = time.monotonic() - t0
    served = sum(len(v) for v in lat.values())
    return {"clients": clients, "seconds": wall, "served": served, "per_second": served / wall,
            "errors": sum(errors.values()), "error_kinds": errors,
            "placement": summary(lat["placement"]), "upload": summary(lat["upload"]),
            "all": summary(lat["placement"] + lat["upload"])}


def check_args(args) -> None:
    """A PlacerError for settings the run cannot use, before the server starts (an unknown method was a traceback
    from the first request)."""
    from placer import presets
    from placer.cli.common import check_at_least
    from placer.errors import PlacerError
    from placer.placers import registry

    check_at_least(args, "requests", "clients", "workers")
    if not args.load_seconds > 0:
        raise PlacerError(f"--load-seconds must be positive, got {args.load_seconds:g}")
    known = registry.names(heuristic_only=True)
    for method in args.methods.split(",") + [args.load_method]:
        if method not in known:
            raise PlacerError(f"unknown heuristic {method!r} (known: {', '.join(known)})")
    presets.get(args.cluster)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--methods", default="metis,heft", help="heuristics to time (comma list)")
    p.add_argument("--cluster", default="4gpu")
    p.add_argument("--requests", type=int, default=30, help="placements per graph and method")
    p.add_argument("--clients", type=int, default=20)
    p.add_argument("--load-seconds", type=float, default=60.0)
    p.add_argument("--load-method", default="metis")
    p.add_argument("--train-command", default=None,
                   help="train command when 'placer train' is missing (e.g. a stand-in); see the docstring")
    p.add_argument("--workers", type=int, default=1, help="uvicorn worker processes (placer serve --workers)")
    p.add_argument("--skip-latency", action="store_true", help="only the load run")
    p.add_argument("--quick", action="store_true", help="5 requests, 4 clients for 10 s")
    args = p.parse_args()
    if args.quick:
        args.requests, args.clients, args.load_seconds = 5, 4, 10.0
    check_args(args)

    import httpx2 as httpx

    from placer.graph_io import load_graph
    from placer.synthetic import layered_graph

    train = None if has_train_command() else args.train_command
    train_note = "placer train" if has_train_command() else (
        f"stand-in {train!r} (placer train is not in this build)" if train else "none (placer train is not in this build)")
    graphs = {"inception_v3": load_graph(ROOT / "graphs" / "inception_v3.json.gz"),
              "layered10000": layered_graph(10000)}
    results: dict = {"cluster": args.cluster, "workers": args.workers, "training_job": train_note,
                     "latency": {}, "load": None}
    with tempfile.TemporaryDirectory(prefix="bench-service-") as tmp:
        data_dir = Path(tmp)
        port = free_port()
        server = start_server(data_dir, port, train, args.workers)
        url = f"http://127.0.0.1:{port}"
        try:
            with httpx.Client(base_url=url, timeout=600) as client:
                ids = {name: upload(client, g) for name, g in graphs.items()}
                print(f"server {url} ({args.workers} worker(s)); cluster {args.cluster}; "
                      f"{args.requests} sequential requests per row")
                if not args.skip_latency:
                    print(f"{'graph':14} {'ops':>6} {'method':12} {'first ms':>9} {'p50 ms':>8} {'p99 ms':>8} "
                          f"{'max ms':>8}  step time")
                for name, g in graphs.items():
                    for method in ([] if args.skip_latency else args.methods.split(",")):
                        row = latency(client, ids[name], method, args.cluster, args.requests)
                        results["latency"][f"{name}/{method}"] = {"ops": len(g), **row}
                        print(f"{name:14} {len(g):6d} {method:12} {row['first_ms']:9.1f} {row['p50_ms']:8.1f} "
                              f"{row['p99_ms']:8.1f} {row['max_ms']:8.1f}  {row['step_time']:.4f} s", flush=True)

                if has_train_command() and not args.skip_latency:
                    rl = rl_latency(client, ids["inception_v3"], args.cluster, min(args.requests, 5))
                    results["rl"] = rl
                    for when, row in rl.items():
                        print(f"{'inception_v3':14} {len(graphs['inception_v3']):6d} {'rl':12} {'':>9} "
                              f"{row['p50_ms']:8.1f} {row['p99_ms']:8.1f} {row['max_ms']:8.1f}  "
                              f"({when.replace('_', ' ')})", flush=True)

                job_id = None
                if has_train_command() or train:
                    r = client.post("/v1/jobs", json={"graph_id": ids["inception_v3"], "cluster": args.cluster,
                                                      "budget_seconds": args.load_seconds + 30})
                    r.raise_for_status()
                    job_id = r.json()["id"]
                    time.sleep(2)
                bodies = [gzip.compress(json.dumps(layered_graph(200, seed=s).to_dict()).encode()) for s in range(8)]
                print(f"load: {args.clients} clients x {args.load_seconds:.0f} s, 70% placements "
                      f"({args.load_method}, inception_v3) / 30% uploads (200 ops); training job: {train_note}",
                      flush=True)
                # Warm-up: a few concurrent placements, so each worker has parsed the graph once
                # (its first placement of a graph pays the parse; reported in the latency table).
                asyncio.run(load_run(url, ids["inception_v3"], 4 * args.workers, 0.5, args.load_method,
                                     args.cluster, bodies))
                load = asyncio.run(load_run(url, ids["inception_v3"], args.clients, args.load_seconds,
                                            args.load_method, args.cluster, bodies))
                if job_id:
                    job = client.get(f"/v1/jobs/{job_id}").json()
                    load["training_job"] = {"state": job["state"], "error": job["error"],
                                            "attempts": job["attempts"], "progress": job["progress"]}
                    client.delete(f"/v1/jobs/{job_id}")
                results["load"] = load
                print(f"  served {load['served']} requests in {load['seconds']:.1f} s "
                      f"({load['per_second']:.1f}/s), errors {load['errors']} {load['error_kinds'] or ''}")
                for kind in ("placement", "upload", "all"):
                    s = load[kind]
                    if s["n"]:
                        print(f"  {kind:9} n={s['n']:5d}  p50 {s['p50_ms']:8.1f} ms  p99 {s['p99_ms']:8.1f} ms  "
                              f"max {s['max_ms']:8.1f} ms")
                if job_id:
                    print(f"  training job during the run: {load['training_job']}")
        finally:
            server.send_signal(signal.SIGTERM)
            try:
                server.wait(timeout=60)
            except subprocess.TimeoutExpired:
                server.kill()
    RESULTS.mkdir(exist_ok=True)
    suffix = ("-quick" if args.quick else "") + (f"-workers{args.workers}" if args.workers > 1 else "") + \
        ("-load" if args.skip_latency else "")
    out = RESULTS / f"service{suffix}.json"
    out.write_text(json.dumps(results, indent=1))
    print(f"wrote {out.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    from placer.cli.common import run_script

    run_script(main, "bench_service", "nothing is kept: run it again")
