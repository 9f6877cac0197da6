"""Benchmark the pre-trained policy: zero-shot and fine-tuned placement against per-graph RL and heuristics.

For every held-out corpus graph (families never trained on) and every graph
of ``graphs/``, on one cluster:

- ``heuristics``: every registered heuristic; the best one's step time;
- ``rl``: per-graph RL from scratch (`placer.rl.trainer` with ``placer
  train``'s defaults: heuristic warm start, kind and balanced groups) for
  ``--rl-budget`` seconds; its final best R, the REINFORCE steps it took to
  reach R, its curve;
- ``zero_shot``: the pre-trained policy, greedy and best-of-K, no training;
  step time and the wall time to place (second call: numba and NumPy warm);
- ``finetune``: per-graph RL started from the pre-trained policy, stopped as
  soon as its best reaches R (or after ``--finetune-budget`` seconds); the
  steps it took against the steps from scratch (when its start is a sample,
  not the greedy placement, the policy imitates it first; those steps count);
- ``finetune_heuristic``: the same, with the heuristic warm start
  (``placer train --init P --warm-start heuristic``): where the best
  heuristic beats the policy's zero-shot start, the pre-trained weights
  imitate it first, as the from-scratch run's random ones do. Its imitation
  steps count, as the from-scratch run's do;
- ``finetune_600``: stage ``finetune`` with the issue's own target, per-graph
  RL's 10-minute result (`python -m bench.bench_rl`'s rows, below), stopped when
  reached, after a fifth of the steps that 10-minute run took to find it, or
  after ``--finetune-600-budget`` seconds; its steps against that run's;
- ``refine``: the zero-shot best-of-K answer and the best heuristic's
  placement, each then improved by ``--refine-seconds`` of local search
  (`placer.placers.refine`, the same search and budget for both);
- ``refine_rl``: per-graph RL trained afresh for ``--rl-budget`` seconds (as
  stage ``rl``, whose placement is not kept), then the same search;
- ``rl_searched``: per-graph RL as stage ``rl``, but its warm start is the best
  heuristic after ``--refine-seconds`` of that search (``placer train``'s
  ``--warm-start-search``), against stage ``rl``'s result;
- ``rl_heavy_edge``: per-graph RL as stage ``rl``, on heavy-edge groups alone
  (``placer train --no-kind-groups --no-balanced-groups``, its default until
  kind and balanced groups beat it), against stage ``rl``.

The issue's reference, per-graph RL with a 10-minute budget, is read from
`python -m bench.bench_rl`'s kept rows (`TEN_MINUTE_RL_FOLDERS`); the heavy-edge
10-minute runs (`TEN_MINUTE_HEAVY_EDGE_RL_FOLDERS`) are shown beside it.

Each stage's result is saved per graph in the JSON as it finishes, so an
interrupted run resumes (``--redo STAGE`` recomputes one). A stage kept from
a run on another ``--cluster``, or with another ``--rl-budget``,
``--refine-seconds`` or ``--best-of`` (or a fine-tune stopped by another
``--finetune-budget``/``--finetune-600-budget``) is refused, not reused: such
a run needs another ``--out`` (or ``--redo``); ``--seed`` and ``--groups``
are not recorded, so keep them with the file. ``--out``'s folder must exist. Also times placing
a synthetic 10k-op graph, and prints the table.

    .venv/bin/python -m bench.bench_pretrain --stages heuristics rl          # no policy needed
    .venv/bin/python -m bench.bench_pretrain --policy /tmp/pt/run2/policy    # the rest

``--set validation`` runs the same stages on the corpus's validation graphs
instead. They chose which checkpoint each pool member exports, its sampling
temperature and which members ship, so their zero-shot figures are not
held-out ones; but nothing about fine-tuning (where it starts, how it
trains) was chosen on them, which makes them the fair test of stage
``finetune_600``:

    .venv/bin/python -m bench.bench_pretrain --set validation --stages heuristics rl zero_shot finetune_600 \
        --out bench/results/pretrain_validation.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
ROOT = Path(__file__).resolve().parents[1]

import numpy as np  # noqa: E402

from placer import presets  # noqa: E402
from placer.cli.common import check_at_least, output_file, run_script  # noqa: E402
from placer.errors import interrupted  # noqa: E402
from placer.fileio import write_atomic  # noqa: E402
from placer.graph_io import load_graph  # noqa: E402
from placer.placers import registry  # noqa: E402
from placer.rl.config import PretrainConfig, TrainConfig  # noqa: E402

from bench.bench_rl import grouping_label  # noqa: E402
from bench.pretrain_tables import add_tables  # noqa: E402

STAGES = ("heuristics", "rl", "zero_shot", "finetune", "finetune_heuristic", "finetune_600", "refine", "refine_rl",
          "rl_searched", "rl_heavy_edge")


GRAPH_SETS = {"table": ("heldout", "held-out"), "validation": ("validation", "validation")}
"""``--set`` -> (the corpus split it takes, how the results name it); ``table`` adds the benchmark suite."""


def default_graphs(which: str = "table") -> list[tuple[str, Path, str]]:
    """(label, path, set): for ``table``, the held-out corpus graphs, then the benchmark suite; for
    ``validation``, the corpus's validation graphs (see the module docstring for what they may show)."""
    from placer.rl.pretrain import read_manifest

    folder, manifest = read_manifest(ROOT / "corpus" / "graphs")
    split, named = GRAPH_SETS[which]
    out = [(e["name"], folder / e["path"], f"{named} ({e['family']})") for e in manifest["graphs"]
           if e["split"] == split]
    if which == "table":
        out += [(p.name.split(".")[0], p, "graphs/") for p in sorted((ROOT / "graphs").glob("*.json.gz"))]
    return out


def stage_heuristics(graph, cluster) -> dict:
    t0 = time.perf_counter()
    steps, best = {}, None
    for name in registry.names(heuristic_only=True):
        try:
            p = registry.place(name, graph, cluster)
        except Exception as e:  # reported, not fatal
            if interrupted(e):  # Ctrl-C inside the compiled simulator
                raise KeyboardInterrupt from e
            steps[name] = None
            print(f"    {name}: failed ({type(e).__name__}: {e})", file=sys.stderr)
            continue
        steps[name] = None if p.oom else p.step_time
        if best is None or (p.oom, p.step_time) < (best.oom, best.step_time):
            best = p
    return {"step_times": steps, "best": best.method, "best_step_time": best.step_time, "best_oom": best.oom,
            "lower_bound": best.lower_bound, "seconds": time.perf_counter() - t0,
            "best_devices": best.assignment(graph, cluster).tolist()}


def heuristic_reference(graph, cluster, heur: dict) -> tuple[str, np.ndarray, float]:
    """The best heuristic's placement, as per-graph RL's warm start takes it: the one stage heuristics kept
    (until RL has run once), else placed again."""
    if "best_devices" in heur:
        return heur["best"], np.asarray(heur["best_devices"], np.int64), heur["best_step_time"]
    h = registry.place(heur["best"], graph, cluster)
    return h.method, h.assignment(graph, cluster), h.step_time


def grouping_of(config) -> str:
    return grouping_label(config.kind_groups, config.balanced_groups, config.critical_groups)


def stage_rl(graph, cluster, heur: dict, args, **grouping) -> dict:
    """Per-graph RL from the best heuristic with ``placer train``'s defaults; `grouping` overrides its
    ``kind_groups``/``balanced_groups`` (stage rl_heavy_edge)."""
    from placer.rl.trainer import TrainConfig, Trainer, train

    config = TrainConfig(groups=args.groups, seed=args.seed, **grouping)
    trainer = Trainer(graph, cluster, config, reference=heuristic_reference(graph, cluster, heur))
    curve = []
    train(trainer, budget_seconds=args.rl_budget, on_step=lambda s: curve.append((s.step, s.elapsed_seconds,
                                                                                  s.best_step_time)))
    b = trainer.state.best
    return {"budget_seconds": args.rl_budget, "step_time": b.step_time, "oom": b.oom, "steps": trainer.state.step,
            "grouping": grouping_of(trainer.config), "found_at_step": b.step, "found_at_seconds": b.elapsed_seconds,
            "imitation_steps": trainer.state.warm_start.get("imitation_steps", 0),
            "warm_start_step_time": trainer.state.warm_start.get("projected_step_time"),
            "curve": curve}


def stage_zero_shot(graph, cluster, policy, args) -> dict:
    from placer.rl.zero_shot import place_zero_shot

    out = {}
    for label, k in (("greedy", 0), (f"best_of_{args.best_of}", args.best_of)):
        t0 = time.perf_counter()
        p = place_zero_shot(graph, cluster, policy, samples=k, seed=args.seed)
        first = time.perf_counter() - t0
        t0 = time.perf_counter()
        p = place_zero_shot(graph, cluster, policy, samples=k, seed=args.seed)
        out[label] = {"step_time": p.step_time, "oom": p.oom, "seconds": time.perf_counter() - t0,
                      "first_call_seconds": first, "groups": p.meta["groups"],
                      "placed_by": f"{p.meta['policy']['name']} v{p.meta['policy']['version']} at "
                                   f"{p.meta['policy']['groups']} groups",
                      "chosen": p.meta["chosen"]}
    out["policy"] = policy.describe()
    return out


def stage_finetune(graph, cluster, policy, target: float, heur: dict | None, args, heuristic: bool = False,
                   budget_seconds: float | None = None, max_steps: int | None = None) -> dict:
    """Fine-tune from `policy` until the best step time reaches `target` (or the budget runs out); from its
    zero-shot answer unsteered (`fine_tuner`'s default), as the pre-training tables were measured."""
    from placer.rl.finetune import fine_tuner
    from placer.rl.trainer import TrainConfig, train

    budget_seconds = args.finetune_budget if budget_seconds is None else budget_seconds
    reference = heuristic_reference(graph, cluster, heur) if heuristic else None
    trainer = fine_tuner(graph, cluster, policy, TrainConfig(seed=args.seed), heuristic=heuristic,
                         reference=reference)
    start = trainer.state.returned.step_time
    curve = []
    reached = {"step": 0 if start <= target else None}

    def on_step(s):
        curve.append((s.step, s.elapsed_seconds, s.best_step_time))
        if reached["step"] is None and s.best_step_time <= target:
            reached["step"] = trainer.state.best.step  # 0 when the imitated heuristic already matched

    train(trainer, budget_seconds=budget_seconds, max_steps=max_steps, on_step=on_step,
          should_stop=lambda: reached["step"] is not None)
    ws = trainer.state.warm_start
    imitated = ws.get("imitated") or ws.get("imitated_start")
    imitated = imitated if imitated and imitated["imitation_steps"] else None  # (0 steps: R was met at the start)
    return {"target": target, "start_step_time": start, "steps_to_match": reached["step"],
            "imitation_steps": imitated["imitation_steps"] if imitated else 0,
            "imitated": (imitated.get("heuristic") or f"zero-shot {ws['start']}") if imitated else None,
            "steps_run": trainer.state.step, "best_step_time": trainer.state.returned.step_time,
            "seconds": trainer.state.elapsed_seconds, "budget_seconds": budget_seconds, "max_steps": max_steps,
            "curve": curve}


def stage_finetune_600(graph, cluster, policy, label: str, args) -> dict:
    """Stage finetune against per-graph RL's 10-minute result, for at most a fifth of the steps (imitation
    included) that run took to find it, or ``--finetune-600-budget`` seconds."""
    row = ten_minute_row(label, cluster.name)
    imitation = row["warm_start"].get("imitation_steps", 0)
    out = stage_finetune(graph, cluster, policy, row["rl_step_time"], None, args,
                         budget_seconds=args.finetune_600_budget,
                         max_steps=max(1, (row["found_at_step"] + imitation) // 5))
    return {**out, "rl_600_found_at_step": row["found_at_step"], "rl_600_imitation_steps": imitation}


def stage_refine(graph, cluster, policy, heur: dict, args) -> dict:
    from placer.placers.refine import refine
    from placer.rl.zero_shot import place_zero_shot

    starts = {"zero_shot": place_zero_shot(graph, cluster, policy, samples=args.best_of, seed=args.seed),
              "heuristic": registry.place(heur["best"], graph, cluster)}
    out = {"seconds": args.refine_seconds}
    for label, start in starts.items():
        p = refine(graph, cluster, start, seconds=args.refine_seconds)
        out[label] = {"start_step_time": start.step_time, "step_time": p.step_time, "oom": p.oom,
                      **{k: p.meta["refined"][k] for k in ("moves", "sweeps", "local_optimum", "seconds")}}
    return out


def stage_refine_rl(graph, cluster, heur: dict, args) -> dict:
    from placer.placers.refine import refine
    from placer.rl.trainer import TrainConfig, Trainer, train

    trainer = Trainer(graph, cluster, TrainConfig(groups=args.groups, seed=args.seed),
                      reference=heuristic_reference(graph, cluster, heur))
    train(trainer, budget_seconds=args.rl_budget)
    start = trainer.best_placement()
    p = refine(graph, cluster, start, seconds=args.refine_seconds)
    return {"rl_budget_seconds": args.rl_budget, "grouping": grouping_of(trainer.config),
            "seconds": args.refine_seconds, "start_step_time": start.step_time,
            "step_time": p.step_time, "oom": p.oom,
            **{k: p.meta["refined"][k] for k in ("moves", "sweeps", "local_optimum")}}


def stage_rl_searched(graph, cluster, heur: dict, args) -> dict:
    from placer.rl.starts import searched_reference
    from placer.rl.trainer import TrainConfig, Trainer, train

    heuristic = heuristic_reference(graph, cluster, heur)
    reference = searched_reference(graph, cluster, heuristic, args.refine_seconds)  # what --warm-start-search imitates
    trainer = Trainer(graph, cluster, TrainConfig(groups=args.groups, seed=args.seed), reference=reference)
    train(trainer, budget_seconds=args.rl_budget)
    b = trainer.state.best
    return {"budget_seconds": args.rl_budget, "search_seconds": args.refine_seconds,
            "heuristic_step_time": heuristic[2], "start_step_time": reference[2],
            "projected_step_time": trainer.state.warm_start.get("projected_step_time"),
            "step_time": b.step_time, "oom": b.oom, "steps": trainer.state.step, "found_at_step": b.step,
            "grouping": grouping_of(trainer.config)}


def time_10k(policy, cluster, samples: int) -> dict:
    from placer.rl.zero_shot import place_zero_shot
    from placer.synthetic import layered_graph

    g = layered_graph(10000, seed=0)
    place_zero_shot(g, cluster, policy, samples=samples)
    runs = []
    for _ in range(3):
        t0 = time.perf_counter()
        p = place_zero_shot(g, cluster, policy, samples=samples)
        runs.append(time.perf_counter() - t0)
    return {"ops": len(g), "samples": samples, "seconds_median": float(np.median(runs)), "seconds": runs,
            "breakdown": p.meta["seconds"]}


TEN_MINUTE_RL_FOLDERS = ("rl_grouped", "rl_grouped_heldout", "rl_grouped_validation")
"""Folders under bench/results/ where `python -m bench.bench_rl --budget-seconds 600` kept its rows with ``placer
train``'s default kind and balanced groups: the suite's graphs, the held-out corpus graphs (``--graphs
corpus/graphs/<held-out>.json.gz``) and the validation ones."""
TEN_MINUTE_HEAVY_EDGE_RL_FOLDERS = ("rl_heavy_edge",)
"""The same on heavy-edge groups alone (``--no-kind-groups --no-balanced-groups``), all ten graphs."""


def ten_minute_row(label: str, cluster: str, folders: tuple[str, ...] = TEN_MINUTE_RL_FOLDERS) -> dict | None:
    """`python -m bench.bench_rl`'s row for per-graph RL with the issue's 10-minute budget, where it has run."""
    for folder in folders:
        path = ROOT / "bench" / "results" / folder / "rows" / f"{label}_{cluster}_600s.json"
        if path.exists():
            return json.loads(path.read_text())
    return None


def ten_minute_rl(label: str, cluster: str, folders: tuple[str, ...] = TEN_MINUTE_RL_FOLDERS) -> float | None:
    """Per-graph RL's step time with the issue's 10-minute budget, where `python -m bench.bench_rl` has run it."""
    row = ten_minute_row(label, cluster, folders)
    return None if row is None or row.get("rl_oom") else row["rl_step_time"]


STAGE_SETTINGS = {
    "rl": (("budget_seconds", "rl_budget"),), "rl_heavy_edge": (("budget_seconds", "rl_budget"),),
    "refine_rl": (("rl_budget_seconds", "rl_budget"), ("seconds", "refine_seconds")),
    "rl_searched": (("budget_seconds", "rl_budget"), ("search_seconds", "refine_seconds")),
    "refine": (("seconds", "refine_seconds"),),
}
"""Stage -> (key in its saved result, option) of the settings it records."""
CAPPED_STAGES = {"finetune": "finetune_budget", "finetune_heuristic": "finetune_budget",
                 "finetune_600": "finetune_600_budget"}
"""Stage -> its budget option: a cap (the stage stops when it reaches its target), which matters only to a
result stopped by it."""


def check_args(args, labels: list[str]) -> None:
    """A PlacerError for settings no run can have, before any work."""
    from placer.errors import PlacerError

    for option in ("rl_budget", "finetune_budget", "finetune_600_budget"):
        if not getattr(args, option) > 0:
            raise PlacerError(f"--{option.replace('_', '-')} must be positive, got {getattr(args, option):g}")
    if not args.refine_seconds >= 0:
        raise PlacerError(f"--refine-seconds must be 0 or more, got {args.refine_seconds:g}")
    check_at_least(args, "groups", "best_of")
    unknown = sorted(set(args.only or ()) - set(labels))
    if unknown:
        raise PlacerError(f"--only: no graph labelled {', '.join(unknown)} (the labels: {', '.join(labels)})")
    output_file(args.out, "--out")
    presets.get(args.cluster)


def check_kept_results(results: dict, args, labels: list[str]) -> None:
    """A PlacerError when the results file holds graphs of another ``--set`` (its summaries would mix the
    two), or, for a stage this run would skip as done, a result made on another cluster or with another
    budget: it would be reported as this run's."""
    from placer.errors import PlacerError

    others = sorted(set(results["graphs"]) - set(labels))
    if others:
        raise PlacerError(f"{args.out} holds graphs not in --set {args.set} ({', '.join(others)}): give this run "
                          "another --out")
    for label, r in results["graphs"].items():
        if args.only and label not in args.only:
            continue
        kept = [stage for stage in args.stages if stage in r and stage not in args.redo]
        if kept and r.get("cluster") not in (None, args.cluster):
            raise PlacerError(f"{args.out} holds {label}'s stages {', '.join(kept)} on {r['cluster']}, not "
                              f"{args.cluster}: give this run another --out")
        for stage in kept:
            for key, option in STAGE_SETTINGS.get(stage, ()):
                if key in r[stage] and r[stage][key] != getattr(args, option):
                    raise PlacerError(f"{args.out} holds {label}'s stage {stage} made with --{option.replace('_', '-')} "
                                      f"{r[stage][key]:g}, not {getattr(args, option):g}: give this run another "
                                      f"--out, or --redo {stage}")
            option, f = CAPPED_STAGES.get(stage), r[stage]
            if (option and f["steps_to_match"] is None and f["budget_seconds"] != getattr(args, option)
                    and not (f.get("max_steps") and f["steps_run"] >= f["max_steps"])):
                raise PlacerError(f"{args.out} holds {label}'s stage {stage} stopped by --{option.replace('_', '-')} "
                                  f"{f['budget_seconds']:g}, not {getattr(args, option):g}: give this run another "
                                  f"--out, or --redo {stage}")
        if "zero_shot" in kept and args.best_of is not None and f"best_of_{args.best_of}" not in r["zero_shot"]:
            raise PlacerError(f"{args.out} holds {label}'s stage zero_shot made with another --best-of: give this "
                              "run another --out, or --redo zero_shot")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--policy", default=None, help="policy folder (default: the shipped policy)")
    parser.add_argument("--cluster", default="4gpu")
    parser.add_argument("--rl-budget", type=float, default=90.0, help="per-graph RL seconds (the issue: 600)")
    parser.add_argument("--finetune-budget", type=float, default=90.0)
    parser.add_argument("--finetune-600-budget", type=float, default=900.0,
                        help="stage finetune_600's most seconds (it stops after a fifth of the 10-minute run's steps)")
    parser.add_argument("--groups", type=int, default=PretrainConfig.groups,
                        help=f"per-graph RL's G (default {PretrainConfig.groups}, pre-training's)")
    parser.add_argument("--best-of", type=int, default=None,
                        help="K of the best-of-K decoding (default: the service's, zero_shot.DEFAULT_SAMPLES)")
    parser.add_argument("--seed", type=int, default=TrainConfig.seed)
    parser.add_argument("--refine-seconds", type=float, default=2.0, help="stage refine: local search seconds")
    parser.add_argument("--stages", nargs="+", choices=STAGES, default=list(STAGES))
    parser.add_argument("--redo", nargs="*", choices=STAGES, default=[])
    parser.add_argument("--only", nargs="*", default=None, help="only these graph labels")
    parser.add_argument("--set", choices=list(GRAPH_SETS), default="table",
                        help="'table': the held-out graphs and graphs/ (default); 'validation': the corpus's "
                             "validation graphs (give another --out)")
    parser.add_argument("--out", default=str(ROOT / "bench" / "results" / "pretrain.json"))
    args = parser.parse_args()

    from placer.rl.saved_policy import load_policy
    from placer.rl.zero_shot import DEFAULT_SAMPLES

    args.best_of = DEFAULT_SAMPLES if args.best_of is None else args.best_of
    graphs = default_graphs(args.set)
    check_args(args, [label for label, _, _ in graphs])

    out = Path(args.out)
    results = json.loads(out.read_text()) if out.exists() else {"graphs": {}}
    check_kept_results(results, args, [label for label, _, _ in graphs])
    results["args"] = vars(args)
    cluster = presets.get(args.cluster)
    policy = (load_policy(args.policy) if {"zero_shot", "finetune", "finetune_heuristic", "finetune_600", "refine"}
              & set(args.stages) else None)

    def save():
        for r in results["graphs"].values():  # the heuristic's placement is only needed until RL has run
            if "rl" in r:
                r.get("heuristics", {}).pop("best_devices", None)
        write_atomic(out, (json.dumps(results, indent=1) + "\n").encode())

    for label, path, which in graphs:
        if args.only and label not in args.only:
            continue
        graph = load_graph(path)
        r = results["graphs"].setdefault(label, {})
        r.update({"set": which, "ops": len(graph), "cluster": cluster.name,
                  "rl_600": ten_minute_rl(label, cluster.name),
                  "rl_600_heavy_edge": ten_minute_rl(label, cluster.name, TEN_MINUTE_HEAVY_EDGE_RL_FOLDERS)})
        for stage in STAGES:
            if stage not in args.stages or (stage in r and stage not in args.redo):
                continue
            if (stage in ("rl", "refine", "refine_rl", "rl_searched", "rl_heavy_edge") and "heuristics" not in r
                    or stage in ("finetune", "finetune_heuristic") and "rl" not in r
                    or stage == "finetune_600" and not r.get("rl_600")):
                print(f"{label}: {stage} needs the earlier stages; skipped", flush=True)
                continue
            t0 = time.perf_counter()
            if stage == "heuristics":
                r[stage] = stage_heuristics(graph, cluster)
            elif stage == "rl":
                r[stage] = stage_rl(graph, cluster, r["heuristics"], args)
            elif stage == "rl_heavy_edge":
                r[stage] = stage_rl(graph, cluster, r["heuristics"], args, kind_groups=False, balanced_groups=False)
            elif stage == "zero_shot":
                r[stage] = stage_zero_shot(graph, cluster, policy, args)
            elif stage == "refine":
                r[stage] = stage_refine(graph, cluster, policy, r["heuristics"], args)
            elif stage == "refine_rl":
                r[stage] = stage_refine_rl(graph, cluster, r["heuristics"], args)
            elif stage == "rl_searched":
                r[stage] = stage_rl_searched(graph, cluster, r["heuristics"], args)
            elif stage == "finetune_600":
                r[stage] = stage_finetune_600(graph, cluster, policy, label, args)
            else:
                r[stage] = stage_finetune(graph, cluster, policy, r["rl"]["step_time"], r["heuristics"], args,
                                          heuristic=stage == "finetune_heuristic")
            save()
            brief = {k: v for k, v in r[stage].items() if not isinstance(v, (list, dict))}
            print(f"{label} [{which}, {len(graph)} ops] {stage} ({time.perf_counter() - t0:.0f} s): {brief}", flush=True)
    if policy is not None:
        results["place_10k_ops"] = time_10k(policy, cluster, args.best_of)
        print(f"placing a {results['place_10k_ops']['ops']}-op graph (best of greedy + {args.best_of} samples): "
              f"{results['place_10k_ops']['seconds_median']:.3f} s (median of 3, warm)")
    add_tables(results, args.best_of)
    save()
    print(results["table"])
    if "finetune_600_table" in results:
        print(results["finetune_600_table"])
        print(json.dumps(results["finetune_600_summary"], indent=1))
    if "refine_table" in results:
        print(results["refine_table"])
        print(json.dumps(results["refine_summary"], indent=1))
    if "rl_searched_table" in results:
        print(results["rl_searched_table"])
        print(json.dumps(results["rl_searched_summary"], indent=1))
    if "rl_heavy_edge_table" in results:
        print(results["rl_heavy_edge_table"])
        print(json.dumps(results["rl_heavy_edge_summary"], indent=1))
    if "summary" in results:
        print(json.dumps(results["summary"], indent=1))
    return 0


if __name__ == "__main__":
    run_script(main, "bench_pretrain", "finished stages are kept in the results file: the same command again continues")
