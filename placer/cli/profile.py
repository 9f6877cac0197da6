"""`placer profile GRAPH [--graphdef MODEL.pb | --saved-model DIR | --keras FILE] -o OUT`: time every op on this
machine's devices, fit their roofline."""

from __future__ import annotations

from placer.cli.common import add_json_flag, output_file, quiet_tensorflow


def add_parser(sub) -> None:
    p = sub.add_parser(
        "profile", help="time every op of a graph on this machine's devices; write the times as op costs",
        description="Run GRAPH's TensorFlow training step on each DEVICE (default: one device of each kind of "
                    "CLUSTER, which defaults to this machine as `placer detect-cluster` sees it), all ops on it, "
                    "one inter-op thread; read each op's time from TensorFlow's step stats (median of --runs "
                    "traced steps after --warmup) and write it as the op's cost for the device's kind. Each "
                    "kind's roofline (compute and memory efficiency, per-op overhead) is fitted to those times "
                    "and stored in the graph's meta, so ops the trace did not see get calibrated estimates. On "
                    "logical CPUs sharing a thread pool (CLUSTER's shared_threads) the costs are scaled by the "
                    "step on TF's default pool over the step on one thread, measured interleaved. "
                    "Nothing is written until the end: an interrupted run leaves OUT as it was.")
    p.add_argument("graph", help="graph file (imported from the model; its GraphDef embedded, given, or traced "
                                 "again from the model)")
    src = p.add_mutually_exclusive_group()
    src.add_argument("--graphdef", help="the GraphDef GRAPH was imported from (not needed when embedded)")
    src.add_argument("--saved-model", metavar="DIR",
                     help="the SavedModel folder GRAPH was imported from: its signature's function is run")
    src.add_argument("--keras", metavar="FILE",
                     help="the .keras file GRAPH was imported from: the step the import traced is run (its "
                          "training step with the same loss and optimizer, at GRAPH's batch size)")
    p.add_argument("--signature", metavar="NAME",
                   help="--saved-model: the signature GRAPH was imported from (default: the one GRAPH records)")
    p.add_argument("--batch", type=int,
                   help="--keras: the batch size GRAPH was imported with (default: the one GRAPH records)")
    p.add_argument("--device", action="append", default=None, metavar="D",
                   help="a device to profile on (repeat for several kinds); default one of each kind of CLUSTER")
    p.add_argument("--cluster", help="this machine as a cluster: whose device kinds and peaks the costs and fit "
                                     "are for (default: detected; a file from `placer detect-cluster`, or local[:N]; "
                                     "not another machine's preset)")
    p.add_argument("--warmup", type=int, default=3, help="untimed steps first (default 3)")
    p.add_argument("--runs", type=int, default=10, help="traced and untraced steps the medians are over (default 10)")
    p.add_argument("-o", "--output", required=True, help="graph file to write, with the costs and the fit")
    p.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    add_json_flag(p, "the summary")
    p.set_defaults(run=run)


def run(args) -> int:
    quiet_tensorflow()
    from placer.cli.output import human_seconds, print_json, print_table
    from placer.cli.measure import Progress
    from placer.errors import PlacerError
    from placer.graph_io import save_graph
    from placer.measure.pinning import canonical_device
    from placer.measure.profile import fit_profile, profile_ops, with_profile
    from placer.measure.source import META_KEY, attach_graphdef

    if args.warmup < 0 or args.runs < 1:
        raise PlacerError(f"need --warmup >= 0 and --runs >= 1, got {args.warmup} and {args.runs}")
    if args.signature is not None and not args.saved_model:
        raise PlacerError("--signature applies to --saved-model")
    if args.batch is not None and not args.keras:
        raise PlacerError("--batch applies to --keras")
    if args.batch is not None and args.batch < 1:
        raise PlacerError(f"--batch must be a positive integer, got {args.batch}")
    out_path = output_file(args.output, "-o", (args.graph,))
    graph, graph_def = _load(args)
    cluster = _cluster(args.cluster)
    by_name = {canonical_device(d.name): d for d in cluster.devices}
    if args.device:
        devices = []
        for name in args.device:
            if canonical_device(name) not in by_name:
                raise PlacerError(f"--device {name}: cluster {cluster.name!r} has no such device "
                                  f"(devices: {', '.join(by_name)})")
            devices.append(by_name[canonical_device(name)])
    else:
        devices = list({d.kind: d for d in reversed(cluster.devices)}.values())[::-1]
        devices = _runnable(devices, args.quiet)
        if not devices:
            raise PlacerError(f"cluster {cluster.name!r} has no device TensorFlow can run here; name one with --device")
    kinds: dict[str, str] = {}
    for d in devices:
        if d.kind in kinds:
            raise PlacerError(f"--device {d.name} and {kinds[d.kind]} are both of kind {d.kind!r}: profile one of "
                              "them (a kind has one cost per op)")
        kinds[d.kind] = d.name
    progress = Progress(args.quiet, graph.name)
    out = graph
    rows = []
    for d in devices:
        progress.note(f"profiling {len(graph)} ops on {d.name} (kind {d.kind}): {args.warmup} warm-up, "
                      f"{args.runs} traced and {args.runs} untraced steps")
        # logical CPUs sharing a pool run one op at a time in the simulator: costs as shares of the pooled step
        pool = cluster.shared_threads is not None and d.name.startswith("/device:CPU:")
        profile = profile_ops(graph, graph_def, device=d.name, runs=args.runs, warmup=args.warmup, pool=pool,
                              progress=progress.step)
        fit = fit_profile(graph, profile, d, pool)
        out = with_profile(out, profile, d.kind, fit, pool)
        rows.append({"device": d.name, "kind": d.kind, "graph_ops": len(graph),
                     "ops_timed": len(profile.kernel_seconds), "step_seconds": profile.step_seconds,
                     "pool_ratio": profile.pool_ratio, "fit": fit.to_dict()})
    if META_KEY not in out.meta:
        attach_graphdef(out, graph_def)  # so measure and export need no --graphdef
    save_graph(out, out_path)
    if args.json:
        print_json({"graph": graph.name, "output": str(out_path), "profiles": rows})
        return 0
    print_table(["device", "kind", "ops timed", "step (1 thread)", "compute eff.", "memory eff.", "op overhead",
                 "fit: median error", "MAPE"],
                [(r["device"], r["kind"], f"{r['ops_timed']}/{r['graph_ops']}", human_seconds(r["step_seconds"]),
                  f"{f['compute_efficiency']:.3g}", f"{f['memory_efficiency']:.3g}", human_seconds(f["op_overhead"]),
                  f"{100 * f['median_error']:.0f}%", f"{100 * f['mape']:.0f}%") for r in rows for f in [r["fit"]]])
    print(f"wrote {out_path}")
    return 0


def _load(args):
    """``(graph, GraphDef)``: the GraphDef embedded, given, or traced again from the model GRAPH was imported
    from, as `placer.measure.source` loads each."""
    from placer.measure import source

    if not (args.saved_model or args.keras):
        return source.load_runnable(args.graph, args.graphdef)
    from placer.importers import import_file

    graph = import_file(args.graph)
    if args.saved_model:
        return graph, source.saved_model_graphdef(graph, args.saved_model, args.signature)
    return graph, source.keras_graphdef(graph, args.keras, args.batch)


def _runnable(devices, quiet: bool):
    """`devices` less the GPUs TensorFlow does not have here (a CPU-only build on a GPU machine), said on stderr."""
    import sys

    gpus = [d for d in devices if d.name.startswith("/device:GPU:")]
    if not gpus:
        return devices
    import tensorflow as tf

    have = len(tf.config.list_physical_devices("GPU"))
    lacking = [d for d in gpus if int(d.name.rpartition(":")[2]) >= have]
    if lacking and not quiet:
        print(f"profile: TensorFlow here has no {lacking[0].name} (a CPU-only build?): not profiling kind "
              f"{lacking[0].kind}", file=sys.stderr)
    return [d for d in devices if d not in lacking]


def _cluster(spec: str | None):
    """The cluster named by --cluster, or this machine detected (device kinds and peaks; no nvidia-smi needed)."""
    if spec is not None:
        from placer import presets
        from placer.errors import PlacerError

        if presets.is_preset(spec) and not (spec == "local" or spec.startswith("local:")):
            raise PlacerError(f"--cluster {spec}: a preset describes another machine, and costs timed here would "
                              "pass for its devices'; profile for this machine (the default, or a cluster file "
                              "from `placer detect-cluster`, or local[:N])")
        return presets.load_cluster(spec)
    from placer.measure.detect import detect_cluster

    return detect_cluster()
