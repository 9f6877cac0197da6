"""Benchmark: samples scored per second by the simulator locally and on 1 or 2 local Ray workers.

The reward loop of `placer train` scores K sampled placements per step;
`--ray` sends them to Ray workers (`placer.measure.distributed.RaySimulator`).
This times one batch of K placements of a benchmark graph, repeated, each way.
With ``--reward measured`` each sample is run for real in TensorFlow (the
graph must carry its GraphDef, e.g. the fidelity benchmark's LSTM, on the
``local`` cluster): the workers then measure, the slow part of that setting.

Run: .venv/bin/python -m bench.bench_ray [--graph graphs/resnet50.json.gz] [--cluster 4gpu] [--samples 32]
     .venv/bin/python -m bench.bench_ray --reward measured --graph bench/results/fidelity/lstm.json.gz \
         --cluster local --samples 8 --repeats 1
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")  # Ray reports usage to ray.io unless told not to

from placer.cli.common import check_at_least, run_script  # noqa: E402
from placer.presets import load_cluster  # noqa: E402
from placer.errors import PlacerError  # noqa: E402
from placer.graph_io import load_graph  # noqa: E402
from placer.simulator import Simulator  # noqa: E402


def rate(run_batch, places, repeats: int) -> float:
    run_batch(places)  # warm up (JIT, actor start)
    t0 = time.perf_counter()
    for _ in range(repeats):
        run_batch(places)
    return repeats * len(places) / (time.perf_counter() - t0)


def _placements(sim, k: int) -> np.ndarray:
    """K random placements that keep colocation groups whole (TensorFlow refuses split ones)."""
    rng = np.random.default_rng(0)
    key = {}
    units = np.array([key.setdefault(op.colocation or op.name, len(key)) for op in sim.graph])
    return rng.integers(0, len(sim.cluster), size=(k, len(key)))[:, units]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--graph", default="graphs/resnet50.json.gz")
    ap.add_argument("--cluster", default="4gpu")
    ap.add_argument("--samples", type=int, default=32, help="placements per batch")
    ap.add_argument("--repeats", type=int, default=5, help="batches timed each way (after one warm-up batch)")
    ap.add_argument("--reward", choices=("simulated", "measured"), default="simulated")
    args = ap.parse_args()
    check_at_least(args, "samples", "repeats")
    try:
        import ray
    except ImportError:
        raise PlacerError("needs the ray package, a dependency of placer: .venv/bin/pip install -e .") from None

    from placer.measure.distributed import RaySimulator

    sim = Simulator(load_graph(args.graph), load_cluster(args.cluster))
    if args.reward == "measured":
        from placer.measure.reward import MeasuredSimulator

        sim = MeasuredSimulator(sim)
    places = _placements(sim, args.samples)
    print(f"{sim.graph.name} ({len(sim.graph)} ops) on {sim.cluster.name}, {args.samples} samples per batch, "
          f"{args.reward} step times")
    print(f"local (in-process): {rate(sim.run_batch, places, args.repeats):8.2f} samples/s")
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)  # a new local instance
    try:
        for workers in (1, 2):
            remote = RaySimulator(sim, workers=workers)
            print(f"Ray, {workers} local worker(s): {rate(remote.run_batch, places, args.repeats):8.2f} samples/s")
            remote.shutdown()
    finally:
        ray.shutdown()
    return 0


if __name__ == "__main__":
    run_script(main, "bench_ray", "nothing is kept: run it again")
