"""Benchmark: simulator speed, and TensorFlow's grappler simulator side by side.

Prints measured figures and writes them to bench/results/simulator.json (a
partial run, ``--quick`` or ``--skip-grappler``, to simulator-quick.json,
simulator-no-grappler.json or simulator-quick-no-grappler.json, so that it
never replaces the full run's figures).

1. Median time of one `Simulator.run` on synthetic training-like graphs of
   1k, 10k and 100k ops (one core: the single-run path is serial), for a
   contiguous split over the GPUs and for a random op-by-op placement; ops/s.
   Target: 10k ops in at most 5 ms median; and the same over 8 GPUs of
   every 8-GPU preset (thread CPU time, robust to other load).
2. Batch scoring (`run_batch`, the reward loop), placements per second.
3. ResNet-50 (batch 32) training step: the same placement scored by our
   simulator and by grappler's `Cluster.MeasureCosts` on a virtual 2-GPU
   cluster; the ratio of their times per placement. Target: >= 100x.

Run: .venv/bin/python -m bench.bench_simulator [--quick] [--skip-grappler]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

from placer import presets  # noqa: E402
from placer.simulator import Simulator  # noqa: E402
from placer.synthetic import layered_graph  # noqa: E402

RESULTS = Path(__file__).parent / "results"


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def median_seconds(fn, repeats: int, clock=time.perf_counter) -> float:
    fn()  # warm (numba compile on first use)
    times = []
    for _ in range(repeats):
        t0 = clock()
        fn()
        times.append(clock() - t0)
    return statistics.median(times)


def contiguous(sim: Simulator, devices: list[int]) -> np.ndarray:
    """Ops split into len(devices) contiguous runs of the topological order."""
    a = np.empty(len(sim.graph), dtype=np.int64)
    chunks = np.array_split(sim.graph.topo_order, len(devices))
    for d, chunk in zip(devices, chunks):
        a[chunk] = d
    return a


def bench_sizes(sizes: list[int], cluster_name: str) -> list[dict]:
    cluster = presets.get(cluster_name)
    gpus = [i for i, d in enumerate(cluster.devices) if d.kind == "gpu"]
    rows = []
    for n in sizes:
        g = layered_graph(n, seed=1)
        t0 = time.perf_counter()
        sim = Simulator(g, cluster)
        build = time.perf_counter() - t0
        rng = np.random.default_rng(0)
        for name, a in [("contiguous", contiguous(sim, gpus)), ("random", rng.choice(gpus, size=n))]:
            repeats = 50 if n <= 10_000 else 10
            t = median_seconds(lambda: sim.run(a), repeats)
            row = {"ops": n, "edges": g.num_edges, "cluster": cluster_name, "placement": name,
                   "median_ms": t * 1e3, "ops_per_second": n / t, "build_seconds": build}
            rows.append(row)
            log(f"  {n:>7} ops {name:<10} {t * 1e3:8.3f} ms  {n / t / 1e6:6.2f} M ops/s")
    return rows


PRESETS_8GPU = ("8gpu-flat", "8gpu", "8gpu-nvlink", "dgx-a100", "dgx-h100", "2x-dgx-a100")
"""The target's clusters (10k ops on an 8-GPU topology, at most 5 ms), the flat model beside them."""


def bench_presets(n: int = 10_000, repeats: int = 100) -> list[dict]:
    """One 10k-op placement over each preset's first 8 GPUs, median thread CPU time.

    Thread time, not wall time: on a shared machine wall time doubles with other load.
    """
    g = layered_graph(n, seed=1)
    rows = []
    for name in PRESETS_8GPU:
        cluster = presets.get(name)
        sim = Simulator(g, cluster)
        gpus = [i for i, d in enumerate(cluster.devices) if d.kind == "gpu"][:8]
        rng = np.random.default_rng(0)
        for placement, a in [("contiguous", contiguous(sim, gpus)), ("random", rng.choice(gpus, size=n))]:
            t = median_seconds(lambda: sim.run(a), repeats, clock=time.thread_time)
            rows.append({"ops": n, "cluster": name, "placement": placement, "median_thread_ms": t * 1e3})
            log(f"  {name:<12} {placement:<10} {t * 1e3:6.2f} ms (thread time)")
    return rows


def bench_batch(n: int, k: int, cluster_name: str) -> dict:
    cluster = presets.get(cluster_name)
    g = layered_graph(n, seed=1)
    sim = Simulator(g, cluster)
    gpus = [i for i, d in enumerate(cluster.devices) if d.kind == "gpu"]
    batch = np.random.default_rng(0).choice(gpus, size=(k, n))
    t = median_seconds(lambda: sim.run_batch(batch), 5)
    log(f"  batch of {k} x {n} ops: {t * 1e3:.1f} ms, {k / t:.0f} placements/s")
    return {"ops": n, "batch": k, "median_ms": t * 1e3, "placements_per_second": k / t}


def bench_grappler(repeats: int) -> dict:
    """ResNet-50 training step: our simulator vs grappler's MeasureCosts, same placement."""
    import tensorflow as tf  # noqa: F401
    from tensorflow.core.protobuf import device_properties_pb2, meta_graph_pb2
    from tensorflow.python.grappler import cluster as gcluster
    from tensorflow.python.grappler import item as gitem

    from placer.importers.graphdef import from_graphdef
    from placer.importers.shapes import with_variable_shapes
    from placer.importers.keras_models import application_model, keras_step

    log("  building the ResNet-50 (batch 32) training step ...")
    step = keras_step(application_model("ResNet50"), 32)
    cf = step.concrete_function()
    graph_def = cf.graph.as_graph_def(add_shapes=True)
    g = from_graphdef(graph_def, "resnet50")
    cluster = presets.get("2gpu")
    sim = Simulator(g, cluster)

    # one placement for both: contiguous halves of the topological order on GPU:0 / GPU:1;
    # ops our importer folded (constants) go with GPU:0 in grappler's copy.
    ours = contiguous(sim, [1, 2])
    tf_names = {1: "/job:localhost/replica:0/task:0/device:GPU:0", 2: "/job:localhost/replica:0/task:0/device:GPU:1"}
    placed = {op.name: tf_names[int(d)] for op, d in zip(g.ops, ours)}
    # grappler infers shapes itself: give it the variables' shapes, or every conv costs nothing
    graph_def = with_variable_shapes(graph_def)
    for node in graph_def.node:
        node.device = placed.get(node.name, tf_names[1])
    mg = meta_graph_pb2.MetaGraphDef(graph_def=graph_def)
    fetch = [t.op.name for t in cf.graph.outputs] + [op.name for op in cf.graph.control_outputs]
    mg.collection_def["train_op"].node_list.value.extend(fetch)
    item = gitem.Item(metagraph=mg, ignore_colocation=True, ignore_user_placement=False)
    v100 = device_properties_pb2.DeviceProperties(
        type="GPU", vendor="NVIDIA", model="Tesla V100", frequency=1380, num_cores=80,
        environment={"architecture": "7.0", "cuda": "11000", "cudnn": "8000"},
        num_registers=65536, l1_cache_size=24576, l2_cache_size=6291456,
        shared_memory_size_per_multiprocessor=98304, memory_size=16 * 2**30, bandwidth=900_000_000)
    devices = [device_properties_pb2.NamedDevice(name=tf_names[i], properties=v100) for i in (1, 2)]
    gc = gcluster.Cluster(devices=devices)

    t_ours = median_seconds(lambda: sim.run(ours), 50)
    t_grappler = median_seconds(lambda: gc.MeasureCosts(item), repeats)
    _, grappler_step, _ = gc.MeasureCosts(item)
    ours_step = sim.run(ours).step_time
    log(f"  ResNet-50: {len(g)} ops (TF nodes {len(graph_def.node)}); ours {t_ours * 1e3:.2f} ms/placement, "
        f"grappler {t_grappler * 1e3:.0f} ms/placement: {t_grappler / t_ours:.0f}x")
    log(f"  step times of that placement: ours {ours_step * 1e3:.2f} ms, grappler {grappler_step * 1e3:.2f} ms")
    return {"graph": "resnet50 training step, batch 32", "ops": len(g), "tf_nodes": len(graph_def.node),
            "ours_ms_per_placement": t_ours * 1e3, "grappler_ms_per_placement": t_grappler * 1e3,
            "speedup": t_grappler / t_ours, "ours_step_time": ours_step, "grappler_step_time": grappler_step}


def results_file(quick: bool, skip_grappler: bool) -> Path:
    """Where a run writes: simulator.json for the full run, a file of its own for a partial one."""
    return RESULTS / ("simulator" + ("-quick" if quick else "") + ("-no-grappler" if skip_grappler else "") + ".json")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1k and 10k ops only, fewer repeats")
    parser.add_argument("--skip-grappler", action="store_true")
    args = parser.parse_args()
    out = {"machine": f"{os.cpu_count()} cores", "numba_threads": None}
    import numba

    out["numba_threads"] = numba.get_num_threads()
    log("single placement, 2gpu preset:")
    out["sizes"] = bench_sizes([1_000, 10_000] if args.quick else [1_000, 10_000, 100_000], "2gpu")
    log("single placement, 8gpu preset:")
    out["sizes_8gpu"] = bench_sizes([10_000], "8gpu")
    log("10k ops over 8 GPUs of each topology preset, thread time:")
    out["presets_8gpu"] = bench_presets()
    log("batch scoring:")
    out["batch"] = bench_batch(10_000, 64, "4gpu")
    if not args.skip_grappler:
        log("grappler side by side:")
        out["grappler"] = bench_grappler(3 if args.quick else 5)
    RESULTS.mkdir(exist_ok=True)
    path = results_file(args.quick, args.skip_grappler)
    path.write_text(json.dumps(out, indent=1))
    print(json.dumps(out, indent=1))
    log(f"wrote {path}")
    return 0


if __name__ == "__main__":
    from placer.cli.common import run_script

    run_script(main, "bench_simulator", "nothing is kept: run it again")
