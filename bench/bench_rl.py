"""Benchmark the learned placer: RL vs the best heuristic vs the lower bound, per graph and cluster.

For every graph in ``graphs/`` (or synthetic layered graphs when there are
none) on each cluster: run every heuristic, train the RL placer for
``--budget-seconds`` (warm start and compilation included), and report the
RL placement's simulated step time against the best heuristic's and the
lower bound, the wall time it took to come within 1% of its final result,
and samples scored per second. Prints a table; saves JSON, a Markdown table
and one curve per run under ``bench/results/``.

    .venv/bin/python -m bench.bench_rl --budget-seconds 600 --groups 128 --clusters 4gpu \
        --out bench/results/rl_grouped                                   # the issue's figure (SUMMARY.md)
    .venv/bin/python -m bench.bench_rl --budget-seconds 60 --graphs graphs/rnnlm.json.gz

``--starts K`` races K heuristic warm starts by successive halving
(`placer.rl.race`, ``placer train --starts K``) instead of training from the
fastest alone; ``--against`` names earlier results to set each row beside
(a column pair per budget and start count; files alike merge):

    .venv/bin/python -m bench.bench_rl --budget-seconds 300 --starts 3 --clusters 4gpu \
        --out /tmp/race --against bench/results/rl_grouped/bench_rl_600s.json \
        bench/results/rl_grouped_heldout/bench_rl_600s.json

Each finished (graph, cluster) run is kept in ``OUT/rows/``; a rerun with the
same budget skips those (so an interrupted benchmark resumes), and two
processes given different ``--graphs`` can share one ``--out`` to use both
cores. A kept row made with other settings (``--samples``, ``--groups``,
``--seed``, ``--warm-start``, a grouping flag) is refused, not reused: such a
run needs another ``--out``. ``--report`` only rebuilds the table from the kept rows.
"""

from __future__ import annotations

import argparse
import glob
import json
import math
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
ROOT = Path(__file__).resolve().parents[1]

from placer import presets  # noqa: E402
from placer.cli.common import add_grouping_flags, check_at_least, check_budget, config_help, run_script  # noqa: E402
from placer.errors import PlacerError, interrupted  # noqa: E402
from placer.graph_io import load_graph  # noqa: E402
from placer.placers import registry  # noqa: E402
from placer.rl.config import WARM_STARTS, TrainConfig  # noqa: E402
from placer.synthetic import layered_graph  # noqa: E402


def best_heuristic(graph, cluster):
    """(name, step time, seconds for all heuristics) of the fastest non-OOM heuristic placement."""
    t0 = time.perf_counter()
    results = []
    for name in registry.names(heuristic_only=True):
        try:
            p = registry.place(name, graph, cluster)
        except Exception as e:  # a failing heuristic is reported, not fatal to the benchmark
            if interrupted(e):  # Ctrl-C inside the compiled simulator
                raise KeyboardInterrupt from e
            print(f"    {name}: failed ({type(e).__name__}: {e})", file=sys.stderr)
            continue
        results.append((p.oom, p.step_time, name, p.assignment(graph, cluster)))
    oom, step, name, assignment = min(results, key=lambda r: r[:3])
    return name, step, assignment, time.perf_counter() - t0


def run_rl(graph, cluster, args, curve_path, reference):
    """Train with the budget (the heuristics already ran: their time is reported apart); returns the figures.

    With ``--starts K`` the K fastest distinct heuristics are raced (running
    them again to rank them is not counted, as the heuristics' time is not).
    """
    from placer.rl.race import Race, race_starts, run
    from placer.rl.trainer import Trainer

    config = train_config(args)
    t0 = time.perf_counter()
    if args.starts > 1:
        trainer = Race(graph, cluster, config, race_starts(graph, cluster, args.starts, config))
    else:
        trainer = Trainer(graph, cluster, config, reference=reference)
    curve = []  # (elapsed, best) including the warm start's placement

    def on_step(s):
        curve.append((s.elapsed_seconds, s.best_step_time, s.min_step_time, s.mean_step_time))

    run(trainer, budget_seconds=args.budget_seconds, on_step=on_step)
    wall = time.perf_counter() - t0
    st = trainer.state
    final = st.best.step_time
    warm = st.warm_start
    start_t = warm.get("seconds", 0.0) + getattr(trainer, "setup_seconds", 0.0)
    points = [(start_t, warm.get("projected_step_time", math.inf))] + [(c[0], c[1]) for c in curve]
    within = next((t for t, b in points if b <= final * 1.01), math.nan)
    rl_seconds = curve[-1][0] - curve[0][0] if len(curve) > 1 else math.nan
    sps = (st.samples - config.samples) / rl_seconds if len(curve) > 1 else math.nan
    _plot(curve, points[0], trainer, curve_path)
    return {
        "rl_step_time": final, "rl_oom": st.best.oom, "steps": st.step, "samples": st.samples,
        "samples_per_second": sps, "seconds_to_within_1pct": within, "train_seconds": st.elapsed_seconds,
        "wall_seconds": wall, "groups": trainer.grouping.num_groups, "found_at_step": st.best.step,
        "warm_start": warm, "lower_bound": trainer.sim.lower_bound,
    }


def _plot(curve, start, trainer, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.5), dpi=100)
    if curve:
        t = [c[0] for c in curve]
        ax.scatter(t, [c[3] * 1e3 for c in curve], s=3, alpha=0.3, label="mean sample")
        ax.scatter(t, [c[2] * 1e3 for c in curve], s=3, alpha=0.6, label="best sample of step")
        ax.step([start[0]] + t, [start[1] * 1e3] + [c[1] * 1e3 for c in curve], where="post", color="k",
                label="best so far")
    ws = trainer.state.warm_start
    if "heuristic_step_time" in ws:
        ax.axhline(ws["heuristic_step_time"] * 1e3, color="tab:red", ls="--", lw=1, label="best heuristic")
    ax.axhline(trainer.sim.lower_bound * 1e3, color="tab:green", ls=":", lw=1, label="lower bound")
    best = trainer.state.best.step_time * 1e3
    ax.set_ylim(trainer.sim.lower_bound * 1e3 * 0.95, best * 1.6)
    ax.set_xlabel("wall time (s)")
    ax.set_ylabel("step time (ms)")
    ax.set_title(f"{trainer.graph.name} on {trainer.cluster.name}", fontsize=9)
    ax.legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


GROUPINGS = ("kind_groups", "balanced_groups", "critical_groups")


def train_config(args) -> TrainConfig:
    """The trainer's settings from the command line (`parse_args`'s, groupings filled in)."""
    return TrainConfig(samples=args.samples, groups=args.groups, seed=args.seed, warm_start=args.warm_start,
                       **{flag: bool(getattr(args, flag)) for flag in GROUPINGS})


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line; each setting not given is `placer train`'s default (`TrainConfig`'s)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0], formatter_class=config_help("TrainConfig"))
    ap.add_argument("--budget-seconds", type=float, default=600.0, help="RL budget per graph and cluster")
    ap.add_argument("--graphs", nargs="*", help="graph files (default: graphs/*.json.gz)")
    ap.add_argument("--clusters", nargs="+", default=["2gpu", "4gpu"])
    ap.add_argument("--samples", type=int, default=TrainConfig.samples)
    ap.add_argument("--groups", type=int, default=TrainConfig.groups)
    ap.add_argument("--seed", type=int, default=TrainConfig.seed)
    ap.add_argument("--warm-start", choices=WARM_STARTS, default=TrainConfig.warm_start)
    ap.add_argument("--starts", type=int, default=1, help="race this many heuristic warm starts (default 1)")
    add_grouping_flags(ap, ", as placer train; rows of other groupings belong in another --out")
    ap.add_argument("--against", nargs="*", default=[], metavar="JSON",
                    help="earlier bench_rl_*.json results to compare each row with (same graph and cluster)")
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "rl"), help="results folder")
    ap.add_argument("--report", action="store_true", help="only rebuild the table from OUT/rows/")
    args = ap.parse_args(argv)
    for flag in GROUPINGS:
        if getattr(args, flag) is None:
            setattr(args, flag, getattr(TrainConfig, flag))
    return args


def check_args(args) -> None:
    """A PlacerError for settings no run can have, before any work (an unknown cluster would otherwise stop the
    benchmark after the runs before it)."""
    check_budget(args.budget_seconds)
    check_at_least(args, "starts")
    train_config(args).check()
    for cname in args.clusters:
        presets.get(cname)


ROW_SETTINGS = (("samples_per_step", "samples"), ("max_groups", "groups"), ("seed", "seed"),
                ("warm_start_mode", "warm_start"))
"""(row key, option) of the settings a kept row was made with, beside its budget, starts and groupings."""


def row_differs(row: dict, args) -> list[str]:
    """The options `row` was made with that differ from this run's, as "--seed 0 (not 1)"; [] when it is this
    run's (a row from before the grouping flags were recorded grouped by heavy edges alone)."""
    out = []
    for key, option in ROW_SETTINGS:
        if key in row and row[key] != getattr(args, option):
            out.append(f"--{option.replace('_', '-')} {row[key]} (not {getattr(args, option)})")
    for flag in GROUPINGS:
        if bool(row.get(flag, False)) != bool(getattr(args, flag)):
            name = flag.replace("_", "-")
            out.append(f"--{'' if row.get(flag) else 'no-'}{name} (not --{'' if getattr(args, flag) else 'no-'}{name})")
    return out


def check_kept_row(row: dict, path: Path, args) -> None:
    """A PlacerError when a kept row was made with other settings than this run's: resumed, or set in one
    table with this run's, it would be reported as this run's."""
    differs = row_differs(row, args)
    if differs:
        raise PlacerError(f"{path} was made with {', '.join(differs)}: give this run another --out")


def main() -> int:
    args = parse_args()
    check_args(args)
    out = Path(args.out)
    (out / "rows").mkdir(parents=True, exist_ok=True)
    if not args.report:
        run_all(args, out)
    return report(args, out)


def _row_path(out, graph_name, cname, budget, starts=1):
    return out / "rows" / (f"{graph_name}_{cname}_{budget:g}s" + (f"_{starts}starts" if starts > 1 else "") + ".json")


def run_all(args, out):
    """Run every (graph, cluster) not yet kept for this budget, keeping each row as it finishes."""

    paths = args.graphs if args.graphs is not None else sorted(glob.glob(str(ROOT / "graphs" / "*.json*")))
    graphs = [load_graph(p) for p in paths] or [layered_graph(2000, seed=0), layered_graph(8000, seed=1)]
    for graph in graphs:  # every kept row checked before any work
        for cname in args.clusters:
            row_path = _row_path(out, graph.name, cname, args.budget_seconds, args.starts)
            if row_path.exists():
                check_kept_row(json.loads(row_path.read_text()), row_path, args)
    for graph in graphs:
        for cname in args.clusters:
            row_path = _row_path(out, graph.name, cname, args.budget_seconds, args.starts)
            if row_path.exists():
                print(f"{graph.name} on {cname}: kept from an earlier run, skipped", file=sys.stderr, flush=True)
                continue
            cluster = presets.get(cname)
            print(f"{graph.name} ({len(graph)} ops) on {cname}: heuristics...", file=sys.stderr, flush=True)
            h_name, h_step, h_assign, h_sec = best_heuristic(graph, cluster)
            print(f"  best heuristic {h_name} {h_step * 1e3:.3f} ms ({h_sec:.1f} s); RL for "
                  f"{args.budget_seconds:g} s...", file=sys.stderr, flush=True)
            r = run_rl(graph, cluster, args, out / f"curve_{row_path.stem}.png", (h_name, h_assign, h_step))
            row = {"graph": graph.name, "ops": len(graph), "cluster": cname, "best_heuristic": h_name,
                   "heuristic_step_time": h_step, "heuristics_seconds": h_sec, **r,
                   "rl_vs_heuristic": r["rl_step_time"] / h_step, "rl_vs_lower_bound": r["rl_step_time"] / r["lower_bound"],
                   "budget_seconds": args.budget_seconds, "samples_per_step": args.samples, "max_groups": args.groups,
                   "seed": args.seed, "warm_start_mode": args.warm_start, "starts": args.starts,
                   **{flag: bool(getattr(args, flag)) for flag in GROUPINGS}}
            print(f"  RL {r['rl_step_time'] * 1e3:.3f} ms = {row['rl_vs_heuristic']:.3f} x heuristic, "
                  f"{row['rl_vs_lower_bound']:.3f} x lower bound; {r['steps']} steps, "
                  f"{r['samples_per_second']:.0f} samples/s, within 1% after {r['seconds_to_within_1pct']:.0f} s",
                  file=sys.stderr, flush=True)
            tmp = row_path.with_suffix(".tmp")
            tmp.write_text(json.dumps(row, indent=1))
            tmp.replace(row_path)


def grouping_label(kind_groups: bool, balanced_groups: bool, critical_groups: bool = False) -> str:
    """How per-graph RL grouped its ops, as the tables say it: "kind + balanced", ..., or "heavy-edge"."""
    flags = [name for name, on in (("kind", kind_groups), ("balanced", balanced_groups),
                                   ("critical", critical_groups)) if on]
    return " + ".join(flags) if flags else "heavy-edge"


def _rows_grouping(rows) -> str:
    """How the kept rows grouped ops (rows from before the flags were recorded: heavy edges alone)."""
    labels = {grouping_label(*(r.get(flag, False) for flag in GROUPINGS)) for r in rows}
    return f"{labels.pop()} groups" if len(labels) == 1 else "groupings differ between rows"


def report(args, out) -> int:
    """Table, geometric mean and JSON from the kept rows of this budget."""
    kept = [(p, json.loads(p.read_text())) for p in sorted((out / "rows").glob("*.json"))]
    kept = [(p, r) for p, r in kept if r.get("budget_seconds") == args.budget_seconds and r.get("starts", 1) == args.starts]
    for p, r in kept:  # the table's title says this run's settings
        check_kept_row(r, p, args)
    rows = [r for _, r in kept]
    against = _earlier_results(args.against)  # label -> {(graph, cluster): step time}
    rows.sort(key=lambda r: (r["graph"], r["cluster"]))
    ratios = [r["rl_vs_heuristic"] for r in rows if not r["rl_oom"]]
    geo = _geomean(ratios)
    header = ("| graph | ops | cluster | best heuristic | heuristic ms | RL ms | RL/heur | RL/LB | groups | steps "
              "| samples/s | s to 1% of final |" + "".join(f" {label} ms | vs {label} |" for label in against))
    lines = [f"RL placer, budget {args.budget_seconds:g} s per graph and cluster, K={args.samples}, "
             f"G<={args.groups}, warm start {args.warm_start}"
             + (f" (race of {args.starts} starts)" if args.starts > 1 else "")
             + f", {_rows_grouping(rows)}"
             + f", seed {args.seed}, {len(rows)} runs", "", header, "|" + "---|" * (12 + 2 * len(against))]
    vs = {label: [] for label in against}
    for r in rows:
        line = (f"| {r['graph']} | {r['ops']} | {r['cluster']} | {r['best_heuristic']} | "
                f"{r['heuristic_step_time'] * 1e3:.3f} | {r['rl_step_time'] * 1e3:.3f} | "
                f"{r['rl_vs_heuristic']:.3f} | {r['rl_vs_lower_bound']:.3f} | {r['groups']} | {r['steps']} | "
                f"{r['samples_per_second']:.0f} | {r['seconds_to_within_1pct']:.0f} |")
        for label, earlier in against.items():
            step_time = earlier.get((r["graph"], r["cluster"]))
            if step_time:
                vs[label].append(r["rl_step_time"] / step_time)
                line += f" {step_time * 1e3:.3f} | {vs[label][-1] - 1:+.1%} |"
            else:
                line += " - | - |"
        lines.append(line)
    lines += ["", f"geometric mean RL/heuristic: {geo:.3f} ({(1 - geo) * 100:.1f}% faster)"]
    geo_vs = {label: _geomean(v) for label, v in vs.items() if v}
    for label, g in geo_vs.items():
        lines.append(f"geometric mean against {label}: {g:.3f} "
                     f"(faster on {sum(x < 1 for x in vs[label])} of {len(vs[label])})")
    text = "\n".join(lines)
    print(text)
    stem = f"bench_rl_{args.budget_seconds:g}s" + (f"_{args.starts}starts" if args.starts > 1 else "")
    (out / f"{stem}.md").write_text(text + "\n")
    (out / f"{stem}.json").write_text(json.dumps({"args": vars(args), "rows": rows, "geomean_rl_vs_heuristic": geo,
                                                  "geomean_vs_earlier": geo_vs}, indent=1))
    return 0


def _geomean(values) -> float:
    return math.exp(sum(math.log(x) for x in values) / len(values)) if values else math.nan


def _earlier_results(paths) -> dict[str, dict[tuple[str, str], float]]:
    """Step times of earlier runs by label ("RL 600 s", "RL 300 s x3 starts"); files with one label merge."""
    against: dict[str, dict[tuple[str, str], float]] = {}
    for path in paths:
        earlier = json.loads(Path(path).read_text())
        starts = earlier["args"].get("starts", 1)
        label = f"RL {earlier['args']['budget_seconds']:g} s" + (f" x{starts} starts" if starts > 1 else "")
        for r in earlier["rows"]:
            against.setdefault(label, {})[r["graph"], r["cluster"]] = r["rl_step_time"]
    return against


if __name__ == "__main__":
    run_script(main, "bench_rl", "finished runs are kept in OUT/rows/: the same command again continues")
