"""`placer compare GRAPH... --cluster C... --methods all|LIST`: every method, side by side."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from placer.cli.common import add_objective, add_refine_sweeps, check_refine, output_file


def add_parser(sub) -> None:
    p = sub.add_parser("compare", help="run several placement methods and compare their step times",
                       description="Place every GRAPH on every CLUSTER with every method, score each placement "
                                   "with the simulator, and print one row each: graph, cluster, method, "
                                   "step_time, lower_bound, oom, place_seconds. Exits 1 if any method failed "
                                   "(its row says why).")
    p.add_argument("graphs", nargs="+", metavar="GRAPH", help="graph files (.json or .json.gz)")
    p.add_argument("--cluster", nargs="+", required=True, metavar="NAME",
                   help="preset names or cluster JSON files")
    p.add_argument("--methods", default="all",
                   help="'all' (every heuristic) or a comma-separated list of methods, e.g. 'all,rl'; 'best' "
                        "is the service's and `placer place`'s method best, its row naming the heuristic it "
                        "chose (default: all)")
    p.add_argument("--rl-budget-seconds", type=float, metavar="S",
                   help="training budget of the rl method per graph and cluster (default: rl's own, 60 s)")
    p.add_argument("--rl-policy", metavar="DIR",
                   help="rl places zero-shot with this pre-trained policy ('shipped' for the bundled one) "
                        "instead of fine-tuning the shipped policy for 60 s (rl's default); with "
                        "--rl-budget-seconds it fine-tunes this one")
    p.add_argument("--rl-steer", action=argparse.BooleanOptionalAction, default=None,
                   help="rl lets the policy's placements steer HEFT and CPOP op by op, as `placer place "
                        "--steer`: the zero-shot answer (--rl-policy) is the fastest, and a fine-tune starts "
                        "from it (the default; --no-rl-steer: the policy's own answer)")
    add_objective(p, help="step_time (default) or throughput: rows gain max_load (the pipelined max device "
                  "load) and the winner is the smallest max_load")
    p.add_argument("--refine-seconds", type=float, metavar="S",
                   help="then improve every method's placement by S seconds of local search in the simulator "
                        "(the same for all; step time objective); the table also shows each method's own")
    add_refine_sweeps(p)
    p.add_argument("--worlds", type=int, metavar="N",
                   help="also rescore every placement in perturbed worlds (N lognormal op-cost draws of each "
                        "sigma, bandwidths x0.5 and x2, latencies x5, GPUs 2x faster; "
                        "placer.placers.robustness) and report each method's geometric-mean and worst ratio "
                        "to the best heuristic of each world")
    p.add_argument("--worlds-seed", type=int, metavar="SEED",
                   help="seed of the --worlds op-cost draws (default 0)")
    p.add_argument("--json", action="store_true",
                   help="print the rows as a JSON list (with --worlds: an object with 'rows' and 'robustness')")
    p.add_argument("--plot", metavar="PNG", help="also draw a bar chart of step time / lower bound to this file")
    p.add_argument("--save", metavar="JSON", help="write the rows to this file after every run (for --resume)")
    p.add_argument("--resume", action="store_true",
                   help="with --save: keep the rows already in that file and run only the missing ones")
    p.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    p.set_defaults(run=run)


def _earlier_rows(path: str, graphs: list, clusters: list) -> dict:
    """Rows of an earlier run saved with --save, by (graph, cluster, method); failed rows are run again.

    The file is rewritten with this run's rows only, so one holding rows of
    graphs or clusters this run does not place is refused rather than
    silently emptied of them (as is a missing file: there is nothing to resume).
    """
    from placer.errors import PlacerError
    from placer.fileio import read_json_file

    if not os.path.exists(path):
        raise PlacerError(f"no rows to resume in {path!r}; drop --resume to start")
    rows = read_json_file(path, "saved rows")
    if not isinstance(rows, list) or not all(isinstance(r, dict) and {"graph", "cluster", "method"} <= set(r)
                                             for r in rows):
        raise PlacerError(f"saved rows {path!r}: not a list of compare rows")
    others = sorted({(r["graph"], r["cluster"]) for r in rows} - {(g.name, c.name) for g in graphs for c in clusters})
    if others:
        listed = ", ".join(f"{g} on {c}" for g, c in others[:3]) + (" ..." if len(others) > 3 else "")
        raise PlacerError(f"cannot resume from {path!r}: it holds rows of graphs or clusters this run does not "
                          f"place ({listed}); drop --resume to replace them, or choose another --save")
    return {(r["graph"], r["cluster"], r["method"]): r for r in rows if "error" not in r}


def _check_distinct_names(what: str, names: list[str], given: list[str]) -> None:
    """Rows (and --resume) know graphs and clusters by name: two inputs of one name would share rows."""
    from placer.errors import PlacerError

    for i, name in enumerate(names):
        if name in names[:i]:
            first = given[names.index(name)]
            same = "given twice" if first == given[i] else f"named alike ({first!r} and {given[i]!r})"
            raise PlacerError(f"{what} {name!r} is {same}; each {what} of a comparison needs its own name")


def _print_robustness(robust: list[dict], n: int) -> None:
    from placer.cli.output import print_table
    from placer.placers.robustness import ROBUSTNESS_FIELDS

    def ratio(x):
        return "-" if x is None else f"{x:.3f}"

    print()
    print_table(list(ROBUSTNESS_FIELDS),
                [(r["graph"], r["cluster"], r["method"], ratio(r["geomean_ratio"]), ratio(r["worst_ratio"]),
                  r["worst_world"] or "-", r["worlds"]) for r in robust])
    print(f"ratio: step time / the best heuristic's in each world (nominal, {n} op-cost draws of each sigma, "
          "bandwidth x0.5 and x2, latency x5, gpu x2); placements made once in the nominal world")


def run(args) -> int:
    from placer.cli.output import human_seconds, print_json, print_table, seconds_per_unit
    from placer.presets import load_cluster
    from placer.errors import PlacerError
    from placer.fileio import write_atomic
    from placer.graph_io import load_graph
    import placer.rl  # noqa: F401  (registers method rl)
    from placer.placers.comparison import ROW_FIELDS, compare, resolve_methods, winners

    if args.resume and not args.save:
        raise PlacerError("--resume needs --save FILE (the rows of the earlier run)")
    output_file(args.save, "--save")
    output_file(args.plot, "--plot")
    methods = resolve_methods(args.methods)
    rl_options = {}
    if args.rl_budget_seconds is not None:
        if not args.rl_budget_seconds > 0:
            raise PlacerError(f"--rl-budget-seconds must be a positive number, got {args.rl_budget_seconds:g}")
        rl_options["budget_seconds"] = args.rl_budget_seconds
    if args.rl_policy is not None:
        rl_options["policy"] = args.rl_policy
    if args.rl_steer is not None:
        from placer.rl.method import NO_POLICY

        if args.rl_steer and args.rl_policy == NO_POLICY:
            raise PlacerError("--rl-steer steers the pre-trained policy's answer; --rl-policy none trains from "
                              "scratch")
        rl_options["steer"] = args.rl_steer
    if rl_options and "rl" not in methods:
        raise PlacerError("--rl-budget-seconds/--rl-policy/--rl-steer need rl among --methods (e.g. --methods "
                          "all,rl)")
    check_refine(args.refine_seconds, args.refine_sweeps, args.objective)
    if args.worlds is not None:
        from placer.placers.robustness import MAX_COST_WORLDS

        if not 1 <= args.worlds <= MAX_COST_WORLDS:
            raise PlacerError(f"--worlds must be an integer from 1 to {MAX_COST_WORLDS}, got {args.worlds}")
        if args.worlds_seed is not None and args.worlds_seed < 0:
            raise PlacerError(f"--worlds-seed must be a non-negative integer, got {args.worlds_seed}")
        if args.resume:
            raise PlacerError("--worlds rescores the placements this run makes; it cannot take rows from --resume")
    clusters = [load_cluster(c) for c in args.cluster]
    graphs = [load_graph(g) for g in args.graphs]
    _check_distinct_names("graph", [g.name for g in graphs], args.graphs)
    _check_distinct_names("cluster", [c.name for c in clusters], args.cluster)
    reuse = _earlier_rows(args.save, graphs, clusters) if args.resume else {}
    units = {g.name: seconds_per_unit(g) for g in graphs}  # rows' times are in their graph's unit
    saved: list[dict] = []  # rows so far, reused ones included, as --save writes them

    def progress(done: int, total: int, row: dict) -> None:
        saved.append(row)
        if args.save:
            write_atomic(Path(args.save), json.dumps(saved, indent=1).encode())
        if args.quiet:
            return
        what = ("error: " + row["error"]) if "error" in row else (
            (f"chose {row['chosen']}, " if "chosen" in row else "") +
            f"{human_seconds(row['step_time'], units[row['graph']])}{' OOM' if row['oom'] else ''}, placed in "
            f"{row['place_seconds']:.2f} s"
            + (f" (refined from {human_seconds(row['unrefined_step_time'], units[row['graph']])})"
               if "unrefined_step_time" in row else ""))
        print(f"[{done}/{total}] {row['graph']} on {row['cluster']} by {row['method']}: {what}",
              file=sys.stderr, flush=True)

    placements: dict = {}
    rows = compare(graphs, clusters, methods, progress=progress, reuse=reuse, objective=args.objective,
                   method_options={"rl": rl_options}, refine_seconds=args.refine_seconds,
                   refine_sweeps=args.refine_sweeps, placements=placements)
    robust = None
    if args.worlds is not None:
        from placer.placers.robustness import robustness

        robust = [r for g in graphs for c in clusters for r in robustness(
            g, c, {m: placements[(g.name, c.name, m)] for m in methods if (g.name, c.name, m) in placements},
            args.worlds, **({} if args.worlds_seed is None else {"seed": args.worlds_seed}))]
    key = "max_load" if args.objective == "throughput" else "step_time"
    if args.plot:
        from placer.plots import compare_chart

        compare_chart(rows, args.plot)
    failed = [r for r in rows if "error" in r]
    if args.json:
        print_json(rows if robust is None else {"rows": rows, "robustness": robust})
    else:
        best = winners(rows, key)
        refined = args.refine_seconds is not None
        table = []
        for r in rows:
            mark = "*" if best.get((r["graph"], r["cluster"])) == r["method"] else ""
            table.append((r["graph"], r["cluster"], r["method"] + (f":{r['chosen']}" if "chosen" in r else "") + mark,
                          human_seconds(r["step_time"], units[r["graph"]]),
                          human_seconds(r["lower_bound"], units[r["graph"]]),
                          "-" if r["oom"] is None else ("yes" if r["oom"] else "no"),
                          "-" if r["place_seconds"] is None else f"{r['place_seconds']:.3f}",
                          r.get("error", ""))
                         + ((("-" if r.get("max_load") is None else f"{r['max_load']:.6g}")
                             + (" (built for step_time)" if r.get("ignored_objective") else ""),)
                            if key == "max_load" else ())
                         + ((human_seconds(r.get("unrefined_step_time"), units[r["graph"]]),) if refined else ()))
        print_table(list(ROW_FIELDS) + ["error"] + (["max_load"] if key == "max_load" else [])
                    + (["unrefined_step_time"] if refined else []), table)
        if refined:
            print(f"step_time: after {args.refine_seconds:g} s of local search; unrefined_step_time: the method's own")
        print("* fastest placement that fits, per graph and cluster"
              + (" (smallest max_load; '(built for step_time)': the method builds for step time, and is scored on "
                 "max_load like the rest)"
                 if key == "max_load" else ""))
        if args.plot:
            print(f"wrote {args.plot}")
        if robust is not None:
            _print_robustness(robust, args.worlds)
    if failed:
        print(f"placer compare: {len(failed)} of {len(rows)} runs failed: "
              + "; ".join(f"{r['method']} on {r['graph']}/{r['cluster']}" for r in failed[:5]),
              file=sys.stderr)
        return 1
    return 0
