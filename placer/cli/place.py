"""`placer place GRAPH --cluster C --method M`: one method's placement, simulated."""

from __future__ import annotations

import argparse
import time

from placer.cli.common import add_graph_and_cluster, add_json_flag, add_objective, add_refine_sweeps


def add_parser(sub) -> None:
    p = sub.add_parser("place", help="place a graph with one method and simulate it",
                       description="Place GRAPH on CLUSTER with METHOD, score the placement with the\n"
                                   "simulator, and print (or write) the placement.\n\n"
                                   "Method rl fine-tunes the shipped policy from its zero-shot answer for\n"
                                   "--budget-seconds, showing its progress on stderr, never answering worse than\n"
                                   "that answer or the best heuristic (it says which it kept), and keeps nothing\n"
                                   "when interrupted: `placer train GRAPH --cluster C --out DIR` is the resumable\n"
                                   "form (checkpoints, --resume).")
    add_graph_and_cluster(p)
    p.add_argument("--method", required=True, help="placement method (listed below), or best")
    p.add_argument("--candidates", metavar="LIST",
                   help="method best: only these heuristics, comma-separated (default: every heuristic; each is "
                        "scored on --objective)")
    add_objective(p, help="what to make small: one step's time (default) or the pipelined max device load "
                  "(`max_load`); a method built for the other is scored on it too, and says so")
    p.add_argument("--budget-seconds", type=float, metavar="S",
                   help="learned methods (rl): training budget in seconds (default 60; with --policy: "
                        "fine-tune it for S seconds); progress on stderr. The first step compiles for a few "
                        "seconds and is always taken, so a budget of a few seconds runs over. Not resumable: "
                        "for long runs use "
                        "`placer train --out DIR`, which checkpoints and takes --resume")
    p.add_argument("--policy", metavar="DIR",
                   help="method rl: place zero-shot (no training, unless --budget-seconds) with this pre-trained "
                        "policy folder (`placer pretrain`), or 'shipped' for the package's own; 'none': train "
                        "from scratch. Default: fine-tune the shipped policy for --budget-seconds")
    p.add_argument("--best-of", type=int, default=None, metavar="K",
                   help="method rl with --policy: the answer (with --budget-seconds, the fine-tune's start) is "
                        "the best of the greedy placement and K seeded samples (default as the service answers: "
                        "`placer.rl.zero_shot.default_samples`, fewer on the biggest graphs "
                        "(docs/learned-placer.md); 0: greedy alone)")
    p.add_argument("--steer", action=argparse.BooleanOptionalAction, default=None,
                   help="method rl: let the policy's placements steer HEFT and CPOP op by op (each op on one of "
                        "the devices they give it); zero-shot (--policy) the answer is the fastest, and a "
                        "fine-tune starts from it (docs/pretrained-policy.md). On by default; --no-steer: the "
                        "policy's own answer")
    p.add_argument("--starts", type=int, default=None, metavar="K",
                   help="method rl: race REINFORCE from the K fastest distinct heuristic placements (2-8; 1, the "
                        "default, races none) by successive halving (as `placer train --starts`), from scratch: "
                        "not with --policy, and without the shipped policy's zero-shot answer")
    p.add_argument("--refine-seconds", type=float, metavar="S",
                   help="then improve the placement by local search in the simulator (moves of whole op groups "
                        "to other devices, each taken only if it also holds in worlds drawn around the "
                        "simulator's) for up to S seconds; any method, step time objective")
    add_refine_sweeps(p)
    p.add_argument("-o", "--output", help="write the placement JSON (the Placement contract) to this file")
    add_json_flag(p, "the placement")
    p.set_defaults(run=run)
    p.formatter_class = argparse.RawDescriptionHelpFormatter
    p.epilog = (
        "heuristic methods (docs/placers.md):\n"
        "  single       everything on the fastest device that fits\n"
        "  round_robin  ops dealt over the GPUs in topological order\n"
        "  expert       one layer per GPU in turn (sequence models), else balanced stages\n"
        "  metis        METIS k-way partition: balanced compute, fewest bytes cut\n"
        "  heft         Heterogeneous Earliest Finish Time (Topcuoglu et al. 2002)\n"
        "  cpop         Critical-Path-on-a-Processor: the critical path on one device (same paper)\n"
        "  m_topo, m_etf, m_sct  Baechi's memory-constrained placers (Jeon et al. 2020)\n"
        "  pipeline_dp  pipeline stages by dynamic programming, built for --objective throughput\n"
        "               (scored on step time too, and a candidate of best, as every heuristic)\n"
        "and any other registered placer (the service's GET /v1/placers lists them all);\n"
        "  best         every heuristic (or --candidates), the fastest placement that fits in\n"
        "               memory, named best:NAME (the service's method best)"
    )


def run(args) -> int:
    from placer.cli.common import check_refine, load_graph_and_cluster, output_file
    from placer.cli.output import human_bytes, human_seconds, print_json, race_line, seconds_per_unit, steered_line
    from placer.cli.train_start import kept_line
    from placer.placers.best import built_for_note
    from placer.errors import PlacerError
    from placer.placement import save_placement
    from placer.placers import best, registry
    import placer.rl  # noqa: F401  (registers method rl)

    is_best = args.method == best.BEST
    if not is_best and args.method not in registry.names():  # fail before loading anything big
        raise PlacerError(f"unknown method {args.method!r}; methods: {', '.join(registry.names() + [best.BEST])}")
    if args.candidates is not None and not is_best:
        raise PlacerError(f"--candidates applies to method best, not {args.method!r}")
    names = None if args.candidates is None else [n.strip() for n in args.candidates.split(",") if n.strip()]
    if is_best:
        best.candidates(args.objective, names)  # bad names: fail before loading anything big
    output_file(args.output, "-o", (args.graph, args.cluster))
    graph, cluster = load_graph_and_cluster(args)
    options = {}
    if args.budget_seconds is not None:
        if is_best or registry.get(args.method).heuristic:
            raise PlacerError(f"--budget-seconds applies to learned methods (rl), not {args.method!r}")
        options["budget_seconds"] = args.budget_seconds
    if args.policy is not None or args.best_of is not None:
        if args.method != "rl":
            raise PlacerError(f"--policy and --best-of apply to method rl, not {args.method!r}")
        if args.policy is None:
            raise PlacerError("--best-of needs --policy (a pre-trained policy to sample from)")
        from placer.rl.method import NO_POLICY

        if args.policy == NO_POLICY and args.best_of is not None:
            raise PlacerError("--best-of samples a pre-trained policy's placements; --policy none trains from scratch")
        options["policy"] = args.policy
        if args.best_of is not None:
            options["best_of"] = args.best_of
    if args.steer is not None:
        from placer.rl.method import NO_POLICY

        if args.method != "rl":
            raise PlacerError(f"--steer/--no-steer apply to method rl, not {args.method!r}")
        if args.steer and args.policy == NO_POLICY:
            raise PlacerError("--steer steers the pre-trained policy's answer; --policy none trains from scratch")
        options["steer"] = args.steer
    if args.starts is not None:
        if args.method != "rl":
            raise PlacerError(f"--starts applies to method rl, not {args.method!r}")
        options["starts"] = args.starts
    check_refine(args.refine_seconds, args.refine_sweeps, args.objective)
    step_times = None
    if is_best:
        t0 = time.perf_counter()
        placement, step_times = best.place_best(graph, cluster, objective=args.objective, names=names)
        placement.meta["best_seconds"] = time.perf_counter() - t0
    else:
        bar = _training_progress(args, graph, cluster, options)
        try:
            placement = registry.place(args.method, graph, cluster, objective=args.objective, **options)
        finally:
            if bar is not None:
                bar.close()
    if args.refine_seconds is not None:
        from placer.placers.refine import refine

        placement = refine(graph, cluster, placement, seconds=args.refine_seconds, max_sweeps=args.refine_sweeps)
    if args.output:
        save_placement(placement, args.output)
    if args.json:
        print_json(placement.to_dict())
        return 0
    counts: dict[str, int] = {}
    for dev in placement.devices.values():
        counts[dev] = counts.get(dev, 0) + 1
    unit = seconds_per_unit(graph)
    print(f"{graph.name} on {cluster.name} by {placement.label}: step time "
          f"{human_seconds(placement.step_time, unit)} (lower bound {human_seconds(placement.lower_bound, unit)}), "
          f"placed in {placement.meta['place_seconds']:.3f} s"
          + (f" (all candidates: {placement.meta['best_seconds']:.3f} s)" if step_times is not None else "")
          + ("  OUT OF MEMORY" if placement.oom else ""))
    if placement.max_load is not None:
        print(f"  throughput: max load {placement.max_load:.6g}")
    if step_times is not None:
        print("  best of: " + ", ".join(f"{n} {'-' if t is None else human_seconds(t, unit)}"
                                        for n, t in step_times.items()))
        for why, what in placement.meta.get("failed", {}).items():
            print(f"  {why} failed: {what}")
    if "refined" in placement.meta:
        r = placement.meta["refined"]
        print(f"  refined by local search from {human_seconds(r['start_step_time'], unit)}: "
              f"{r['moves']} group move(s) in {r['sweeps']} sweep(s), {r['seconds']:.2f} s"
              + (" (a local optimum)" if r["local_optimum"] else ""))
    if "steered" in placement.meta:
        print("  " + steered_line(placement.meta["steered"], unit))
    if "race" in placement.meta:
        print("  " + race_line(placement.meta["race"], unit))
    if "kept" in placement.meta:
        print("  " + kept_line(placement.meta["kept"], unit))
    if "ignored_objective" in placement.meta:
        print("  " + built_for_note(placement.method, placement.meta["ignored_objective"]))
    for dev in cluster.device_names:
        if dev in counts or placement.peak_memory.get(dev, 0) > 0:
            print(f"  {dev}: {counts.get(dev, 0)} ops, peak memory {human_bytes(placement.peak_memory.get(dev, 0.0))}")
    if args.output:
        print(f"wrote {args.output}")
    return 0


def _training_progress(args, graph, cluster, options: dict):
    """For method rl when it trains (not zero-shot): a `ProgressLine` on stderr fed by each step (``on_step``
    in `options`) and each step of the warm start's imitation (``on_imitation``), its first line saying how
    long it trains and that `placer train` is the resumable form (printed with the first step, so that
    options rl refuses stay a one-line error). None for other methods."""
    from placer.cli.output import IMITATION_NOTE_SECONDS, ProgressLine, seconds_per_unit
    from placer.rl.method import DEFAULT_BUDGET_SECONDS, NO_POLICY, policy_to_fine_tune
    from placer.rl.steering import steers

    if args.method != "rl" or (args.policy not in (None, NO_POLICY) and args.budget_seconds is None):
        return None
    budget = DEFAULT_BUDGET_SECONDS if args.budget_seconds is None else args.budget_seconds
    bar = ProgressLine(None, budget, seconds_per_unit(graph))
    starts = options.get("starts", 1)
    if starts > 1:
        what = f"racing {starts} heuristic warm starts, trained from scratch"
    elif args.policy == NO_POLICY:
        what = "training from scratch"
    elif policy_to_fine_tune(args.policy, cluster, starts) is None:
        what = f"training from scratch ({cluster.name!r} has more devices than the shipped policy addresses)"
    else:
        shipped = "shipped " if args.policy in (None, "shipped") else ""
        steered_note = " (steered where faster)" if steers(args.steer) else ""
        what = f"fine-tuning the {shipped}policy from its zero-shot answer{steered_note}"
    noted = False
    last_note = -IMITATION_NOTE_SECONDS

    def note_once() -> None:
        nonlocal noted
        if not noted:
            bar.note(f"rl: {what} for {budget:g} s (Ctrl-C stops it and keeps nothing; `placer train --out DIR` "
                     "checkpoints and resumes)")
            noted = True

    def on_imitation(steps: int, probability: float, seconds: float, limit: float | None) -> None:
        from placer.rl.trainer import IMITATION_TARGET

        nonlocal last_note
        note_once()
        if steps == 1 or seconds - last_note >= IMITATION_NOTE_SECONDS or probability > IMITATION_TARGET:
            bar.note(f"rl: warm start, imitation step {steps}: per-group probability {probability:.3f} (stops "
                     f"at {IMITATION_TARGET:g}), {seconds:.1f} s" + (f" of at most {limit:.1f}" if limit else ""))
            last_note = seconds

    def on_step(stats) -> None:
        note_once()
        bar.show(stats)

    options["on_step"] = on_step
    options["on_imitation"] = on_imitation
    return bar
