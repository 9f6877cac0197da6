"""Do the policy's proposals steer the list schedulers, or would any few devices per op do as well?

For each graph and cluster: the shipped policy's zero-shot answer with steering (`placer.rl.steering`), then,
at each depth, each steered scheduler (HEFT, CPOP) offered the devices the policy's placements propose against
the same scheduler offered as many devices per op drawn at random (the answer's device among them, seeded).
Step times over the best heuristic's of `bench/results/policy_worlds.json` (the same presets and simulator).

    python -m bench.bench_steering --graphs corpus/graphs/densenet121_64_b16.json.gz --clusters dgx-a100

Writes ``bench/results/steering.json`` (``--out``).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from placer import presets
from placer.graph_io import load_graph
from placer.placers.common import Problem
from placer.rl import steering
from placer.rl.saved_policy import load_policy
from placer.rl.zero_shot import default_samples, place_zero_shot
from placer.simulator import Simulator

RESULTS = Path(__file__).resolve().parent / "results"
HEURISTICS = RESULTS / "policy_worlds.json"


def best_heuristics() -> dict[tuple[str, str], tuple[str, float]]:
    """``(graph, cluster) -> (method, step time)`` of the fastest heuristic that fits, from `HEURISTICS`."""
    best: dict[tuple[str, str], tuple[str, float]] = {}
    for r in json.loads(HEURISTICS.read_text())["rows"]:
        key = (r["graph"], r["cluster"])
        if r["method"] != "rl" and not r["oom"] and (key not in best or r["step_time"] < best[key][1]):
            best[key] = (r["method"], r["step_time"])
    return best


def random_offers(proposed: np.ndarray, answer: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """As many devices per op as `proposed` offers it, the answer's device and the rest drawn at random."""
    n, d = proposed.shape
    offered = np.zeros_like(proposed)
    offered[np.arange(n), answer] = True
    for i, k in enumerate(proposed.sum(axis=1).tolist()):
        others = [j for j in rng.permutation(d).tolist() if j != answer[i]][:k - 1]
        offered[i, others] = True
    return offered


def one_pair(path: str, cluster_name: str, best: dict, seed: int) -> dict:
    graph, cluster = load_graph(path), presets.get(cluster_name)
    captured: list = []
    real = steering.steer

    def capturing(graph_, cluster_, sim_, ranked, **kw):
        captured.append(ranked)
        return real(graph_, cluster_, sim_, ranked, **kw)

    steering.steer = capturing  # the zero-shot answer imports it at call time
    try:
        t0 = time.perf_counter()
        placed = place_zero_shot(graph, cluster, load_policy(), samples=default_samples(len(graph)), steer=True)
        seconds = time.perf_counter() - t0
    finally:
        steering.steer = real
    ranked = captured[-1]
    sim, problem = Simulator(graph, cluster), Problem.build(graph, cluster)
    method, reference = best[(graph.name, cluster_name)]
    rng = np.random.default_rng(seed)
    depths = {}
    for depth in steering.depths_of(steering.DEPTHS, len(ranked)):
        proposed = steering.offered_by(ranked[:depth], len(cluster))
        at_random = random_offers(proposed, ranked[0], rng)
        for name, scheduler in steering.SCHEDULERS.items():
            times = []
            for offered in (proposed, at_random):
                res = sim.run_batch(scheduler(problem, offered=offered).assignment[None])
                times.append(None if res.oom[0] else float(res.step_time[0]) / reference)
            depths[f"{name} {depth}"] = {"policy": times[0], "random": times[1],
                                         "devices_per_op": float(proposed.sum(1).mean())}
    row = {"graph": graph.name, "cluster": cluster_name, "ops": len(graph), "best_heuristic": method,
           "best_heuristic_step_time": reference,
           "unsteered": placed.meta["steered"]["unsteered_step_time"] / reference,
           "steered": placed.step_time / reference, "seconds": seconds,
           "steering_seconds": placed.meta["steered"]["seconds"], "depths": depths}
    print(f"{graph.name} on {cluster_name}: {row['unsteered']:.3f} -> {row['steered']:.3f} of {method} "
          f"({seconds:.1f} s); policy / random: "
          + ", ".join(f"{d}: {_ratio(v['policy'])} / {_ratio(v['random'])}" for d, v in depths.items()), flush=True)
    return row


def _ratio(value: float | None) -> str:
    return "OOM" if value is None else f"{value:.3f}"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--graphs", nargs="+", required=True, metavar="PATH")
    p.add_argument("--clusters", nargs="+", default=["4gpu", "8gpu-nvlink", "dgx-a100"])
    p.add_argument("--seed", type=int, default=0, help="seeds the random offers")
    p.add_argument("--out", type=Path, default=RESULTS / "steering.json")
    args = p.parse_args(argv)
    best = best_heuristics()
    rows = [one_pair(g, c, best, args.seed) for c in args.clusters for g in args.graphs]
    args.out.write_text(json.dumps({"rows": rows}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
