"""Does the learned start still matter after local search? The heuristics given the same search.

For each graph and cluster: every heuristic's placement and the shipped policy's zero-shot answer (steered,
the default); then `placer.placers.refine.refine` (judged in drawn worlds, as shipped) for a fixed number of
sweeps from the zero-shot answer (each of ``--sweeps``) and, for the largest, from every heuristic within
`NEAR` of the fastest (at most `REFINED_HEURISTICS`, fastest first). No time limit stops a search, so the
placements are the same on any machine; the seconds are this machine's. Every placement is rescored in
the robustness worlds (`placer.placers.robustness.robustness`, ``--worlds`` draws of each cost sigma, as
``placer compare --worlds``), the best heuristic of each world chosen among the heuristics and the refined
heuristics alike. Against 10-minute RL where ``bench/results/rl_presets.json`` has the pair.

    python -m bench.bench_refine_starts [--graphs PATH ...] [--clusters NAME ...] [--sweeps 1 2 4]

Writes ``bench/results/refine_starts.json`` (``--out``) after each pair; the same command again goes on
where it stopped (rows made with other ``--sweeps`` or ``--worlds`` are done again).
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

from placer import presets
from placer.cli.common import check_at_least, output_file, run_script
from placer.errors import PlacerError
from placer.graph_io import load_graph
from placer.placers.refine import refine
from placer.placers.robustness import robustness

from bench.pair_rows import place_pair, save_rows, stored_rows

RESULTS = Path(__file__).resolve().parent / "results"
GRAPHS = [f"graphs/{g}.json.gz" for g in ("inception_v3", "nmt", "nmt4", "resnet50", "rnnlm", "transformer")] + [
    f"corpus/graphs/{g}.json.gz" for g in ("densenet121_64_b16", "efficientnetb0_96_b32", "xception_96_b16",
                                           "gru_lm_2x1024_t16_b64")]
CLUSTERS = ["4gpu", "8gpu-nvlink", "dgx-a100"]
NEAR = 1.3
REFINED_HEURISTICS = 4
NO_TIME_LIMIT = 3600.0  # seconds: far more than the sweeps take, so only the sweep count stops a search


def one_pair(path: str, cluster_name: str, sweeps: list[int], worlds: int) -> dict:
    """The row of one graph and cluster (see the module docstring)."""
    graph, cluster = load_graph(path), presets.get(cluster_name)
    placed, fits, best, zero_shot, zero_shot_seconds = place_pair(graph, cluster)
    row = {"graph": graph.name, "file": Path(path).name, "cluster": cluster_name, "ops": len(graph),
           "best_heuristic": best, "heuristics": fits,
           "zero_shot": {"step_time": zero_shot.step_time, "seconds": zero_shot_seconds},
           "zero_shot_refined": {}, "heuristics_refined": {}}
    assignments = {m: p.assignment(graph, cluster) for m, p in placed.items()}
    assignments["zero_shot"] = zero_shot.assignment(graph, cluster)

    def search(start, n: int) -> dict:
        t = time.perf_counter()
        found = refine(graph, cluster, start, seconds=NO_TIME_LIMIT, max_sweeps=n)
        return {"step_time": found.step_time, "seconds": time.perf_counter() - t,
                "assignment": found.assignment(graph, cluster)}

    for n in sweeps:
        found = search(zero_shot, n)
        assignments[f"zero_shot+{n}"] = found.pop("assignment")
        row["zero_shot_refined"][str(n)] = found
    near = sorted((m for m in fits if fits[m] <= NEAR * fits[best]), key=fits.get)[:REFINED_HEURISTICS]
    for m in near:
        found = search(placed[m], max(sweeps))
        assignments[f"{m}+{max(sweeps)}"] = found.pop("assignment")
        row["heuristics_refined"][m] = found
    reference = list(fits) + [f"{m}+{max(sweeps)}" for m in near]
    ratios = {r["method"]: r["ratios"]
              for r in robustness(graph, cluster, assignments, n=worlds, heuristics=reference)}
    row["robustness_with_refined"] = {m: _worst(r) for m, r in ratios.items()}
    # over the best of the heuristics alone in each world, as `placer compare --worlds` judges
    best_heuristic = {w: min(ratios[m][w] for m in fits) for w in ratios[best] if ratios[best][w] is not None}
    row["robustness"] = {m: _worst({w: r[w] / best_heuristic[w] for w in best_heuristic}) for m, r in ratios.items()}
    return row


def _worst(ratios: dict[str, float]) -> dict:
    """The nominal ratio, the worst ratio and its world of one method's ratios by world (None: no heuristic fit)."""
    ratios = {w: x for w, x in ratios.items() if x is not None}
    world = max(ratios, key=ratios.get)
    return {"nominal": ratios["nominal"], "worst_ratio": ratios[world], "worst_world": world}


def summary(rows: list[dict], sweeps: list[int], rl: dict) -> list[str]:
    """Geometric means over `rows`: each start against the unrefined and the refined best heuristic."""
    def geo(values):
        return math.exp(sum(map(math.log, values)) / len(values)) if values else float("nan")

    top = max(sweeps)
    lines = []
    for label, key, step in [("zero-shot", "zero_shot", lambda r: r["zero_shot"]["step_time"])] + [
            (f"zero-shot + {n} sweep" + "s" * (n > 1), f"zero_shot+{n}",
             lambda r, n=n: r["zero_shot_refined"][str(n)]["step_time"]) for n in sweeps]:
        nominal = [step(r) / r["heuristics"][r["best_heuristic"]] for r in rows]
        worst_worse = sum(r["robustness"][key]["worst_ratio"] > r["robustness"][r["best_heuristic"]]["worst_ratio"]
                          + 1e-9 for r in rows)
        vs_rl = [step(r) / rl[(r["graph"], r["cluster"])] for r in rows if (r["graph"], r["cluster"]) in rl]
        lines.append(f"{label:24} / best heuristic {geo(nominal):.3f} (slower on {sum(x > 1 + 1e-9 for x in nominal)}"
                     f" of {len(rows)}), worst world worse than its on {worst_worse}; / 10-minute RL "
                     f"{geo(vs_rl):.3f} (within 5% on {sum(x <= 1.05 for x in vs_rl)} of {len(vs_rl)})")
    refined_best = [min(r["heuristics_refined"], key=lambda m: r["heuristics_refined"][m]["step_time"])
                    for r in rows]
    steps = [r["heuristics_refined"][m]["step_time"] for m, r in zip(refined_best, rows)]
    ours = [r["zero_shot_refined"][str(top)]["step_time"] for r in rows]
    worse = sum(r["robustness_with_refined"][f"zero_shot+{top}"]["worst_ratio"]
                > r["robustness_with_refined"][f"{m}+{top}"]["worst_ratio"] + 1e-9 for m, r in zip(refined_best, rows))
    lines.append(f"best heuristic + {top} sweeps / best heuristic "
                 f"{geo([b / r['heuristics'][r['best_heuristic']] for b, r in zip(steps, rows)]):.3f}; "
                 f"zero-shot + {top} sweeps / it {geo([o / b for o, b in zip(ours, steps)]):.3f} "
                 f"(slower on {sum(o > b * (1 + 1e-9) for o, b in zip(ours, steps))} of {len(rows)}, worst world "
                 f"worse than its on {worse}, the refined heuristics in each world's reference)")
    return lines


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--graphs", nargs="+", default=GRAPHS, metavar="PATH")
    p.add_argument("--clusters", nargs="+", default=CLUSTERS, metavar="NAME")
    p.add_argument("--sweeps", nargs="+", type=int, default=[1, 2, 4], metavar="N",
                   help="sweeps of local search from the zero-shot answer; the largest also from the heuristics")
    p.add_argument("--worlds", type=int, default=3, help="draws of each op-cost sigma in the robustness worlds")
    p.add_argument("--out", default=str(RESULTS / "refine_starts.json"))
    args = p.parse_args(argv)
    if min(args.sweeps) < 1:
        raise PlacerError(f"--sweeps must be at least 1, got {min(args.sweeps)}")
    check_at_least(args, "worlds")
    for name in args.clusters:
        presets.get(name)
    out = output_file(args.out, "--out")
    settings = {"sweeps": sorted(set(args.sweeps)), "worlds": args.worlds}
    rows = stored_rows(out, settings)
    done = {(r["file"], r["cluster"]) for r in rows}
    rl_file = RESULTS / "rl_presets.json"
    rl = {(r["graph"], r["cluster"]): r["step_time"] for r in json.loads(rl_file.read_text())["rows"]} \
        if rl_file.exists() else {}
    pairs = [(g, c) for c in args.clusters for g in args.graphs]
    for k, (path, cluster) in enumerate(pairs, 1):
        if (Path(path).name, cluster) in done:
            continue
        t0 = time.perf_counter()
        row = one_pair(path, cluster, settings["sweeps"], args.worlds)
        rows.append(row)
        save_rows(out, settings, rows)
        zs, refined = row["zero_shot"]["step_time"], row["zero_shot_refined"]
        best = row["heuristics"][row["best_heuristic"]]
        print(f"[{k}/{len(pairs)}] {row['graph']} on {cluster} ({time.perf_counter() - t0:.0f} s): zero-shot "
              f"{zs / best:.3f} of {row['best_heuristic']}, refined "
              + ", ".join(f"{n}: {v['step_time'] / best:.3f}" for n, v in refined.items()), flush=True)
    for line in summary(rows, settings["sweeps"], rl):
        print(line)
    return 0


if __name__ == "__main__":
    run_script(main, "bench_refine_starts", "finished pairs are kept in --out: the same command again goes on")
