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

``--security`` runs instead, against a server with two API keys and an admin key:

3. ``/healthz`` p50 / p99, probed every 20 ms, while 4 clients each upload
   30 MB JSON graphs (``--big-uploads`` each): the service parses large
   bodies off its event loop (target p99 under 100 ms). Also the same probe
   idle, and how long a 30 MB placement body without a key takes to get its 401.
4. A two-key load run: two clients per key for ``--load-seconds`` store
   graphs and placements and, between them, read every id the other key
   stored and list everything: each read of another key's row is counted
   (there must be none); the admin key then lists both keys' rows.

Run: .venv/bin/python -m bench.bench_service [--quick] [--clients 20] [--load-seconds 60] [--workers N]
     [--skip-latency] [--security [--big-uploads N]]
Loopback only; bounded in requests (--requests) and time (--load-seconds).
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import json
import random
import tempfile
import time
from pathlib import Path

from bench.service_server import free_port, start_server, stop_server, summary

ROOT = Path(__file__).resolve().parents[1]
RESULTS = Path(__file__).parent / "results"


def has_train_command() -> bool:
    """Whether this build's CLI has `placer train` (the training job the load run puts beside the requests)."""
    from placer.cli.main import COMMANDS

    return "train" in COMMANDS


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


KEYS = {"PLACER_API_KEYS": "bench-key-a,bench-key-b", "PLACER_ADMIN_KEY": "bench-admin"}


def big_graph_body(target_bytes: int, seed: int = 0) -> bytes:
    """A valid graph in the JSON format of about `target_bytes`: a layered graph whose ops carry long,
    TensorFlow-like scoped names (within the default max_ops)."""
    from placer.synthetic import layered_graph

    data = layered_graph(60_000, seed=seed).to_dict()
    per_op = len(json.dumps(data, separators=(",", ":"))) / len(data["nodes"])
    inputs = sum(len(n.get("inputs", ())) for n in data["nodes"]) / len(data["nodes"])
    pad = max(0, int((target_bytes / len(data["nodes"]) - per_op) / (1 + inputs)))
    scope = "tower_0/model/" + "block/" * max(0, (pad - 14) // 6)
    rename = {n["name"]: scope + n["name"] for n in data["nodes"]}
    for n in data["nodes"]:
        n["name"] = rename[n["name"]]
        n["inputs"] = [rename[i] for i in n.get("inputs", ())]
    return json.dumps(data, separators=(",", ":")).encode()


def _upload_all(url: str, body: bytes, clients: int, uploads_each: int, key: str, out) -> None:
    """In a process of its own (so that sending 120 MB does not delay the probe's own event loop): `clients`
    concurrent clients each upload `body` `uploads_each` times; the status counts go to `out`."""
    import httpx2 as httpx

    statuses: dict[str, int] = {}

    async def uploader() -> None:
        async with httpx.AsyncClient(base_url=url, timeout=600, headers={"Authorization": f"Bearer {key}"}) as c:
            for _ in range(uploads_each):
                r = await c.post("/v1/graphs", content=body, headers={"content-type": "application/json"})
                statuses[str(r.status_code)] = statuses.get(str(r.status_code), 0) + 1

    async def run() -> None:
        await asyncio.gather(*(uploader() for _ in range(clients)))

    asyncio.run(run())
    out.put(statuses)


async def healthz_during(url: str, body: bytes, clients: int, uploads_each: int, key: str) -> dict:
    """/healthz latency probed every 20 ms while `clients` each upload `body` `uploads_each` times (the uploads
    from another process)."""
    import multiprocessing

    import httpx2 as httpx

    ctx = multiprocessing.get_context("fork")
    out = ctx.Queue()
    uploads = ctx.Process(target=_upload_all, args=(url, body, clients, uploads_each, key, out))
    probes: list[float] = []
    t0 = time.monotonic()
    uploads.start()
    async with httpx.AsyncClient(base_url=url, timeout=30) as c:
        while uploads.is_alive():
            t = time.perf_counter()
            r = await c.get("/healthz")
            probes.append(time.perf_counter() - t)
            assert r.status_code == 200, r.text
            await asyncio.sleep(0.02)
    wall = time.monotonic() - t0
    statuses = out.get(timeout=10) if uploads.exitcode == 0 else {"upload process failed": uploads.exitcode}
    return {"clients": clients, "uploads": clients * uploads_each, "body_mb": len(body) / 1e6,
            "seconds": wall, "upload_statuses": statuses, "healthz": summary(probes)}


async def idle_healthz(url: str, seconds: float) -> dict:
    import httpx2 as httpx

    probes = []
    async with httpx.AsyncClient(base_url=url, timeout=30) as c:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            t0 = time.perf_counter()
            (await c.get("/healthz")).raise_for_status()
            probes.append(time.perf_counter() - t0)
            await asyncio.sleep(0.02)
    return summary(probes)


async def two_key_run(url: str, seconds: float, cluster: str) -> dict:
    """Two clients per key storing graphs and placements and trying every id the other key stored."""
    import httpx2 as httpx

    from placer.synthetic import layered_graph

    keys = KEYS["PLACER_API_KEYS"].split(",")
    stored: dict[str, dict[str, list[str]]] = {k: {"graphs": [], "placements": []} for k in keys}
    counts = {"requests": 0, "cross_reads": 0, "foreign_404": 0, "errors": 0}
    deadline = time.monotonic() + seconds

    async def client(key: str, other: str, seed: int) -> None:
        rng = random.Random(seed)
        async with httpx.AsyncClient(base_url=url, timeout=120, headers={"Authorization": f"Bearer {key}"}) as c:
            while time.monotonic() < deadline:
                graph = layered_graph(rng.randrange(50, 200), seed=rng.randrange(1000)).to_dict()
                r = await c.post("/v1/graphs", json=graph)
                counts["requests"] += 1
                if r.status_code != 201:
                    counts["errors"] += 1
                    continue
                gid = r.json()["id"]
                stored[key]["graphs"].append(gid)
                r = await c.post("/v1/placements", json={"graph_id": gid, "cluster": cluster, "method": "round_robin"})
                counts["requests"] += 1
                if r.status_code == 201:
                    stored[key]["placements"].append(r.json()["id"])
                else:
                    counts["errors"] += 1
                for kind in ("graphs", "placements"):
                    for foreign in list(stored[other][kind][-5:]):
                        r = await c.get(f"/v1/{kind}/{foreign}")
                        counts["requests"] += 1
                        counts["cross_reads"] += r.status_code == 200
                        counts["foreign_404"] += r.status_code == 404
                    r = await c.get(f"/v1/{kind}", params={"limit": 1000})
                    counts["requests"] += 1
                    listed = {x["id"] for x in r.json()["data"]}
                    counts["cross_reads"] += len(listed & set(stored[other][kind]))

    t0 = time.monotonic()
    await asyncio.gather(*(client(k, keys[1 - i], 10 * i + j) for i, k in enumerate(keys) for j in range(2)))
    wall = time.monotonic() - t0
    async with httpx.AsyncClient(base_url=url, timeout=120,
                                 headers={"Authorization": f"Bearer {KEYS['PLACER_ADMIN_KEY']}"}) as c:
        r = await c.get("/v1/graphs", params={"limit": 1000})
        admin_sees = {x["id"] for x in r.json()["data"]} if r.status_code == 200 else set()
    everyone = {g for k in keys for g in stored[k]["graphs"]}
    return {"seconds": wall, **counts, "stored": {k: {kind: len(v) for kind, v in s.items()} for k, s in stored.items()},
            "admin_sees_all_graphs": everyone <= admin_sees}


def security_main(args) -> int:
    """``--security``: the /healthz probe under 30 MB uploads and the two-key run (see the docstring)."""
    import httpx2 as httpx

    body = big_graph_body(30 * 10**6)
    results: dict = {}
    with tempfile.TemporaryDirectory(prefix="bench-service-") as tmp:
        data_dir = Path(tmp)
        port = free_port()
        server = start_server(data_dir, port, None, keys=KEYS)
        url = f"http://127.0.0.1:{port}"
        try:
            results["healthz_idle"] = asyncio.run(idle_healthz(url, 3.0))
            inline = b'{"method":"single","graph":' + body + b"}"  # parsed before the key check, once
            t0 = time.perf_counter()
            r = httpx.post(f"{url}/v1/placements", content=inline, timeout=600,
                           headers={"content-type": "application/json"})
            results["no_key_30mb"] = {"status": r.status_code, "ms": 1e3 * (time.perf_counter() - t0)}
            h = asyncio.run(healthz_during(url, body, 4, args.big_uploads, "bench-key-a"))
            results["healthz_during_uploads"] = h
            print(f"/healthz idle: p50 {results['healthz_idle']['p50_ms']:.1f} ms, "
                  f"p99 {results['healthz_idle']['p99_ms']:.1f} ms")
            print(f"30 MB placement body without a key: HTTP {r.status_code} in "
                  f"{results['no_key_30mb']['ms']:.0f} ms")
            print(f"/healthz while 4 clients upload {h['body_mb']:.1f} MB graphs ({h['uploads']} uploads in "
                  f"{h['seconds']:.1f} s, {h['upload_statuses']}): n={h['healthz']['n']} "
                  f"p50 {h['healthz']['p50_ms']:.1f} ms, p99 {h['healthz']['p99_ms']:.1f} ms, "
                  f"max {h['healthz']['max_ms']:.1f} ms", flush=True)
            run = asyncio.run(two_key_run(url, args.load_seconds, args.cluster))
            results["two_keys"] = run
            print(f"two keys x 2 clients for {run['seconds']:.1f} s: {run['requests']} requests, "
                  f"{run['cross_reads']} cross-key reads, {run['foreign_404']} foreign ids answered 404, "
                  f"{run['errors']} errors; stored {run['stored']}; admin sees every graph: "
                  f"{run['admin_sees_all_graphs']}")
        finally:
            stop_server(server)
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / f"service-security{'-quick' if args.quick else ''}.json"
    out.write_text(json.dumps(results, indent=1))
    print(f"wrote {out.relative_to(ROOT)}")
    return 0


def check_args(args) -> None:
    """A PlacerError for settings the run cannot use, before the server starts (an unknown method was a traceback
    from the first request)."""
    from placer import presets
    from placer.cli.common import check_at_least
    from placer.errors import PlacerError
    from placer.placers import registry

    check_at_least(args, "requests", "clients", "workers", "big_uploads")
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
    p.add_argument("--security", action="store_true",
                   help="instead: /healthz under 30 MB uploads and the two-key run (see the docstring)")
    p.add_argument("--big-uploads", type=int, default=3, help="--security: 30 MB uploads per client (4 clients)")
    args = p.parse_args()
    if args.quick:
        args.requests, args.clients, args.load_seconds, args.big_uploads = 5, 4, 10.0, 2
    check_args(args)
    if args.security:
        return security_main(args)

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
            stop_server(server)
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
