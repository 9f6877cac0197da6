"""Is the issue's worst-world target within reach? A search that knows the judging worlds, beside one that does not.

The target asks a learned placement's worst ratio over the robustness worlds to be no worse than the best
heuristic's. Where the zero-shot answer misses it, is that the method, or is there no faster placement whose
worst world holds? For each pair: every heuristic's placement and the shipped policy's zero-shot answer;
then `placer.placers.refine.descend` for ``--sweeps`` sweeps, on the policy's groups (128), from the best
heuristic and from the zero-shot answer, judged two ways:

- ``oracle``: in the judging worlds themselves (`placer.placers.robustness.perturbed_worlds`, the very
  worlds that score the result). A move is taken only if it is faster in the nominal world and lowers the
  worst, over all of them, of the step time over the start's. From the best heuristic, every placement it
  takes is faster than that heuristic in every judging world, so its worst ratio is no worse than the
  heuristic's: its nominal ratio is a placement that meets the target, found by knowing the test.
- ``drawn``: in four worlds drawn around the nominal one (`placer.placers.refine.drawn_worlds`), as
  `refine` judges by default; it does not know the judging worlds.

No time limit stops a search, so the placements are the same on any machine. Every placement is rescored
as ``placer compare --worlds`` does (ratio to the best heuristic of each world).

    python -m bench.bench_worst_frontier [--pairs GRAPH@CLUSTER ...] [--sweeps 8]

Writes ``bench/results/worst_frontier.json`` (``--out``) after each pair; the same command again goes on
where it stopped.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from placer import presets
from placer.cli.common import check_at_least, output_file, run_script
from placer.errors import PlacerError
from placer.graph_io import load_graph
from placer.grouping import group_graph_fitting
from placer.placers.refine import DEFAULT_GROUPS, WORLDS, descend, drawn_worlds
from placer.placers.robustness import perturbed_worlds, robustness
from placer.simulator import Simulator

from bench.pair_rows import place_pair, save_rows, stored_rows

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
PAIRS = [  # where the shipped zero-shot answer's worst world is worse than the best heuristic's (policy_worlds_steered)
    "graphs/inception_v3@4gpu", "graphs/resnet50@4gpu", "graphs/resnet50@8gpu-nvlink", "graphs/rnnlm@dgx-a100",
    "graphs/transformer@dgx-a100", "corpus/graphs/densenet121_64_b16@4gpu",
    "corpus/graphs/densenet121_64_b16@8gpu-nvlink", "corpus/graphs/densenet121_64_b16@dgx-a100",
    "corpus/graphs/xception_96_b16@4gpu", "corpus/graphs/xception_96_b16@dgx-a100",
    "corpus/graphs/gru_lm_2x1024_t16_b64@4gpu"]
NO_TIME_LIMIT = 3600.0  # seconds: far more than the sweeps take, so only the sweep count stops a search


def one_pair(path: str, cluster_name: str, sweeps: int, worlds: int) -> dict:
    """The row of one graph and cluster (see the module docstring)."""
    graph, cluster = load_graph(path), presets.get(cluster_name)
    placed, fits, best, zero_shot, _ = place_pair(graph, cluster)
    assignments = {m: p.assignment(graph, cluster) for m, p in placed.items()}
    assignments["zero_shot"] = zero_shot.assignment(graph, cluster)
    sim = Simulator(graph, cluster)
    judging = [Simulator(w.graph, w.cluster, times=w.times) for w in perturbed_worlds(graph, cluster, worlds)][1:]
    judges = {"oracle": judging, "drawn": drawn_worlds(graph, cluster, sim.times, WORLDS)}
    group_of_op = group_graph_fitting(graph, cluster, DEFAULT_GROUPS, sim.times).group_of_op
    seconds = {}
    for start in (best, "zero_shot"):
        for judge, others in judges.items():
            t0 = time.perf_counter()
            found = descend(sim, group_of_op, assignments[start], seconds=NO_TIME_LIMIT, max_sweeps=sweeps,
                            worlds=others)
            assignments[f"{start}+{judge}"] = found.assignment
            seconds[f"{start}+{judge}"] = time.perf_counter() - t0
    rows = robustness(graph, cluster, assignments, n=worlds, heuristics=list(fits))
    return {"graph": graph.name, "file": Path(path).name, "cluster": cluster_name, "ops": len(graph),
            "best_heuristic": best, "step_time": fits[best], "search_seconds": seconds,
            "placements": {r["method"]: {"nominal": r["ratios"]["nominal"], "worst_ratio": r["worst_ratio"],
                                         "worst_world": r["worst_world"]}
                           for r in rows if r["method"] == best or "+" in r["method"] or r["method"] == "zero_shot"}}


def summary(rows: list[dict]) -> list[str]:
    """Per kind of placement: geometric-mean nominal ratio, pairs slower than the best heuristic, and pairs whose
    worst world is worse than the best heuristic's."""
    lines = []
    for kind in ("zero_shot", "{best}+oracle", "{best}+drawn", "zero_shot+oracle", "zero_shot+drawn"):
        cells = [r["placements"][kind.format(best=r["best_heuristic"])] for r in rows]
        own = [r["placements"][r["best_heuristic"]]["worst_ratio"] for r in rows]
        nominal = np.array([c["nominal"] for c in cells])
        worse = sum(c["worst_ratio"] > o + 1e-9 for c, o in zip(cells, own))
        lines.append(f"{kind.replace('{best}', 'best heuristic'):26} nominal {np.exp(np.log(nominal).mean()):.3f} "
                     f"(slower on {int((nominal > 1 + 1e-9).sum())} of {len(rows)}), worst world worse than the "
                     f"best heuristic's on {worse}")
    return lines


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--pairs", nargs="+", default=PAIRS, metavar="GRAPH@CLUSTER",
                   help="graph files (without .json.gz) and presets (default: the zero-shot answer's misses)")
    p.add_argument("--sweeps", type=int, default=8, help="sweeps of each search (default 8)")
    p.add_argument("--worlds", type=int, default=3, help="draws of each op-cost sigma in the judging worlds")
    p.add_argument("--out", default=str(RESULTS / "worst_frontier.json"))
    args = p.parse_args(argv)
    check_at_least(args, "sweeps")
    check_at_least(args, "worlds")
    pairs = []
    for pair in args.pairs:
        graph, at, cluster = pair.rpartition("@")
        if not at or not graph:
            raise PlacerError(f"--pairs: expected GRAPH@CLUSTER, got {pair!r}")
        presets.get(cluster)
        pairs.append((graph if graph.endswith((".json", ".json.gz")) else f"{graph}.json.gz", cluster))
    out = output_file(args.out, "--out")
    settings = {"sweeps": args.sweeps, "worlds": args.worlds}
    rows = stored_rows(out, settings)
    done = {(r["file"], r["cluster"]) for r in rows}
    for k, (path, cluster) in enumerate(pairs, 1):
        if (Path(path).name, cluster) in done:
            continue
        t0 = time.perf_counter()
        row = one_pair(path, cluster, args.sweeps, args.worlds)
        rows.append(row)
        save_rows(out, settings, rows)
        cells = ", ".join(f"{m}: {c['nominal']:.3f} / {c['worst_ratio']:.3f}" for m, c in row["placements"].items())
        print(f"[{k}/{len(pairs)}] {row['graph']} on {cluster} ({time.perf_counter() - t0:.0f} s): {cells}",
              flush=True)
    for line in summary(rows):
        print(line)
    return 0


if __name__ == "__main__":
    run_script(main, "bench_worst_frontier", "finished pairs are kept in --out: the same command again goes on")
