"""Which policy ships: two policies' zero-shot answers on the corpus's validation pairs, side by side.

Every shipped pool was chosen by one rule: place the validation graphs (the
manifest's validation split, never trained on, never in the comparison table)
zero-shot on the clusters the policies trained on, best of greedy + the
default K samples, at several seeds, and ship the candidate whose step times
over the shipped one's have the lower geometric mean. The comparison table
(`placer compare ... --worlds`) is the test set, so it judges the shipped
pool afterwards; it never chooses it.

For each pair the first seed's two answers are also rescored in the
robustness worlds (`placer.placers.robustness.perturbed_worlds`, ``--worlds``
cost draws per sigma), B's step over A's in each: a candidate that wins only
in the nominal world shows it there. Prints one line per pair and seed, then
the summary; ``--out`` writes them as JSON. The policies are placed as
``placer place --method rl --policy P --no-steer`` places (steering is the
same for both; the policies' own answers are what differs).

``--as-main`` compares a newly trained main member in the shipped pool's place: B is then policy A's folder
with B's weights and card as its main member (A's other members, ``pool`` and ``pool_groups`` kept).

    .venv/bin/python -m bench.compare_pools shipped runs/v8/policy --as-main
    .venv/bin/python -m bench.compare_pools shipped runs/pool --seeds 0 --graphs bilstm_3x512_t12_b128
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
ROOT = Path(__file__).resolve().parents[1]

import numpy as np  # noqa: E402

from placer import presets  # noqa: E402
from placer.cli.common import run_script  # noqa: E402
from placer.errors import PlacerError  # noqa: E402
from placer.fileio import write_atomic  # noqa: E402
from placer.graph_io import load_graph  # noqa: E402
from placer.placers.robustness import MAX_COST_WORLDS, perturbed_worlds, rescore  # noqa: E402
from placer.rl import pretrain  # noqa: E402
from placer.rl.saved_policy import CARD, SHIPPED_POLICY_DIR, load_policy  # noqa: E402
from placer.rl.zero_shot import default_samples, place_zero_shot  # noqa: E402


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("a", help="the policy folder to compare against ('shipped': the package's)")
    parser.add_argument("b", help="the candidate policy folder")
    parser.add_argument("--corpus", default=str(ROOT / "corpus" / "graphs"))
    parser.add_argument("--cluster", nargs="+", default=None,
                        help="clusters (default: those policy A was trained on)")
    parser.add_argument("--graphs", nargs="+", default=None, help="these corpus graphs (default: the validation "
                                                                   "split)")
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--worlds", type=int, default=3, help="op-cost worlds per sigma in the rescoring "
                                                              "(0: the fixed worlds alone)")
    parser.add_argument("--as-main", action="store_true",
                        help="B is a main member: compare A's pool with B's weights and card in its main member's "
                             "place")
    parser.add_argument("--out", default=None, help="also write the rows and the summary to this JSON file")
    return parser.parse_args(argv)


def with_main_member(pool: str, member: str, into: Path) -> Path:
    """A copy of policy folder `pool` in `into` whose main member is `member`'s (weights and card; the pool's
    ``name``, ``pool`` and ``pool_groups`` kept, so its other members are pooled as before)."""
    source = SHIPPED_POLICY_DIR if pool == "shipped" else Path(pool)
    shutil.copytree(source, into)
    shutil.copy(Path(member) / "weights.npz", into / "weights.npz")
    card = json.loads((Path(member) / CARD).read_text())
    kept = json.loads((source / CARD).read_text())
    card.update({k: kept[k] for k in ("name", "pool", "pool_groups") if k in kept})
    (into / CARD).write_text(json.dumps(card, indent=2) + "\n")
    return into


def geomean(values) -> float:
    return float(np.exp(np.mean(np.log(np.asarray(values, dtype=np.float64)))))


def step_of(placement) -> float:
    """A placement's step time, infinite when it does not fit: no ratio may hide an OOM answer."""
    return float("inf") if placement.oom else float(placement.step_time)


def ratios(b, a) -> np.ndarray:
    """B's step times over A's; 1 where both are infinite (neither fits), so one such pair leaves a mean defined."""
    b, a = np.asarray(b, dtype=np.float64), np.asarray(a, dtype=np.float64)
    neither_fits = np.isinf(a) & np.isinf(b)
    return np.where(neither_fits, 1.0, b / np.where(neither_fits, 1.0, a))


def compare_pair(graph, cluster, a, b, seeds: list[int], worlds: int) -> list[dict]:
    """One row per seed: A's and B's step times and their ratio; the first also B over A in the worlds."""
    rows = []
    samples = default_samples(len(graph))
    for i, seed in enumerate(seeds):
        xa, xb = (place_zero_shot(graph, cluster, p, samples=samples, seed=seed) for p in (a, b))
        row = {"graph": graph.name, "cluster": cluster.name, "seed": seed, "a_ms": 1e3 * step_of(xa),
               "b_ms": 1e3 * step_of(xb), "ratio": float(ratios(step_of(xb), step_of(xa)))}
        if i == 0:
            steps, ooms = rescore(list(perturbed_worlds(graph, cluster, worlds)),
                                  np.stack([xa.assignment(graph, cluster), xb.assignment(graph, cluster)]))
            steps = np.where(ooms, np.inf, steps)
            world_ratios = ratios(steps[:, 1], steps[:, 0])
            row.update(worlds_geomean=geomean(world_ratios), worlds_worst=float(world_ratios.max()),
                       worlds_best=float(world_ratios.min()))
        rows.append(row)
    return rows


def summary(rows: list[dict], seeds: list[int]) -> dict:
    ratios = [r["ratio"] for r in rows]
    rescored = [r for r in rows if "worlds_geomean" in r]
    return {"pairs": len(rescored), "geomean": geomean(ratios), "worst_pair": max(ratios),
            "per_seed": {str(s): geomean([r["ratio"] for r in rows if r["seed"] == s]) for s in seeds},
            "worlds_geomean": geomean([r["worlds_geomean"] for r in rescored]),
            "worlds_worst_geomean": geomean([r["worlds_worst"] for r in rescored]),
            "worlds_best_geomean": geomean([r["worlds_best"] for r in rescored])}


def main() -> int:
    args = parse_args()
    if not args.seeds:
        raise PlacerError("--seeds: give at least one seed")
    if not 0 <= args.worlds <= MAX_COST_WORLDS:
        raise PlacerError(f"--worlds must be from 0 to {MAX_COST_WORLDS}, got {args.worlds}")
    with tempfile.TemporaryDirectory() as tmp:
        b_folder = with_main_member(args.a, args.b, Path(tmp) / "pool") if args.as_main else args.b
        return compare(args, load_policy(args.a), load_policy(b_folder))


def compare(args: argparse.Namespace, a, b) -> int:
    """Place, print and write what `main` was asked for, policies `a` and `b` loaded."""
    folder, manifest = pretrain.read_manifest(args.corpus)
    entries = {e["name"]: e for e in manifest["graphs"]}
    names = args.graphs or [e["name"] for e in pretrain.validation_entries(manifest)]
    unknown = sorted(set(names) - set(entries))
    if unknown:
        raise PlacerError(f"--graphs: not in the corpus: {unknown}")
    clusters = args.cluster or (a.card.get("trained_on") or {}).get("clusters")
    if not clusters:
        raise PlacerError(f"policy {args.a!r} does not say which clusters it was trained on: give --cluster")
    rows = []
    for name in names:
        graph = load_graph(folder / entries[name]["path"])
        for c in clusters:
            for row in compare_pair(graph, presets.get(c), a, b, args.seeds, args.worlds):
                rows.append(row)
                worlds = (f" | worlds B/A geomean {row['worlds_geomean']:.3f}, worst {row['worlds_worst']:.3f}"
                          if "worlds_geomean" in row else "")
                print(f"{name:28s} {c:12s} seed {row['seed']}: A {row['a_ms']:9.2f} ms, B {row['b_ms']:9.2f} ms, "
                      f"B/A {row['ratio']:.3f}{worlds}", flush=True)
    result = summary(rows, args.seeds)
    print(f"B/A over {result['pairs']} pairs x {len(args.seeds)} seeds: geomean {result['geomean']:.4f} "
          f"(per seed {', '.join(f'{v:.4f}' for v in result['per_seed'].values())}), worst pair "
          f"{result['worst_pair']:.3f}; in the worlds: geomean {result['worlds_geomean']:.4f}, "
          f"worst world's geomean {result['worlds_worst_geomean']:.4f}, best world's "
          f"{result['worlds_best_geomean']:.4f}")
    if args.out:
        write_atomic(Path(args.out), (json.dumps({"a": args.a, "b": args.b, "rows": rows, "summary": result},
                                                 indent=1) + "\n").encode())
    return 0


if __name__ == "__main__":
    run_script(main, "compare_pools", "nothing was written: run it again")
