"""`placer simulate GRAPH --cluster C --placement P`: the step time of a placement."""

from __future__ import annotations

from placer.cli.common import add_graph_and_cluster, add_json_flag, add_objective, add_placement_option, output_file


def add_parser(sub) -> None:
    p = sub.add_parser("simulate", help="simulate one training step of a placed graph",
                       description="Simulate one step of GRAPH placed by PLACEMENT on CLUSTER: step time, "
                                   "per-device busy time and peak memory, bytes moved, out-of-memory.")
    add_graph_and_cluster(p)
    add_placement_option(p)
    add_objective(p, help="step_time (default): one step's time; throughput: also the pipelined max per-device "
                  "load (`max_load`, the MSR paper's model: compute + communication per device)")
    p.add_argument("--trace", metavar="FILE",
                   help="also write the step as a Chrome trace (JSON; .json.gz gzipped) for Perfetto "
                        "(ui.perfetto.dev) or chrome://tracing: ops per device, transfers per link, memory")
    p.add_argument("--gantt", metavar="FILE", help="also draw the step as a Gantt chart (PNG, SVG or PDF)")
    add_json_flag(p, "the result")
    p.set_defaults(run=run)


def run(args) -> int:
    from placer.cli.common import load_graph_and_cluster
    from placer.cli.output import human_bytes, human_seconds, print_json, print_table, seconds_per_unit
    from placer.placement import load_placement, split_colocation_groups
    from placer.simulator import Simulator

    output_file(args.trace, "--trace")
    output_file(args.gantt, "--gantt")
    graph, cluster = load_graph_and_cluster(args)
    placement = load_placement(args.placement)
    sim = Simulator(graph, cluster)
    assignment = placement.assignment(graph, cluster)
    res = sim.run(assignment)
    split = split_colocation_groups(graph, assignment)
    loads = None
    if args.objective == "throughput":
        from placer.objectives import ThroughputModel

        loads = ThroughputModel(graph, cluster).loads(assignment)
    devices = [
        {"device": d.name, "busy": float(b), "peak_memory": float(p), "memory_bytes": d.memory_bytes,
         "ops": int((assignment == k).sum())}
        for k, (d, b, p) in enumerate(zip(cluster.devices, res.busy, res.peak_memory))
    ]
    if loads is not None:
        for k, d in enumerate(devices):
            d.update(load=float(loads.load[k]), compute=float(loads.compute[k]),
                     communication=float(loads.communication[k]), held_bytes=float(loads.held_bytes[k]))
    out = {
        "graph": graph.name, "cluster": cluster.name, "method": placement.method,
        "step_time": res.step_time, "lower_bound": res.lower_bound, "oom": res.oom,
        "bytes_moved": res.bytes_moved,
        "peak_memory": {d["device"]: d["peak_memory"] for d in devices},
        "devices": devices,
        "objective": args.objective,
        "colocation_ok": not split,
    }
    if loads is not None:
        out.update(max_load=loads.max_load, memory_ok=loads.memory_ok)
    if args.trace:
        from placer.trace import chrome_trace, write_trace

        out["trace"] = str(write_trace(chrome_trace(graph, cluster, assignment, res, method=placement.method),
                                       args.trace))
    if args.gantt:
        from placer.plots import gantt_chart

        out["gantt"] = str(gantt_chart(graph, cluster, assignment, res, args.gantt))
    if args.json:
        print_json(out)
        return 0
    unit = seconds_per_unit(graph)
    print(f"{graph.name} on {cluster.name}: step time {human_seconds(res.step_time, unit)} "
          f"(lower bound {human_seconds(res.lower_bound, unit)}), moved {human_bytes(res.bytes_moved)}"
          + ("  OUT OF MEMORY" if res.oom else ""))
    if split:
        shown = ", ".join(repr(k) for k in split[:3]) + (f" and {len(split) - 3} more" if len(split) > 3 else "")
        print(f"COLOCATION BROKEN: ops that TensorFlow keeps on one device are split: group(s) {shown}")
    for what in ("trace", "gantt"):
        if what in out:
            print(f"wrote {what} {out[what]}")
    if loads is not None:
        if "time_unit" in graph.meta:  # max loads are printed as the graph holds them
            print(f"time unit: {graph.meta['time_unit']}")
        print(f"throughput: max load {loads.max_load:.6g} (a new micro-batch every max load)"
              + ("" if loads.memory_ok else "  OVER MEMORY"))
        print_table(["device", "ops", "load", "compute", "communication", "held"],
                    [(d["device"], d["ops"], d["load"], d["compute"], d["communication"],
                      human_bytes(d["held_bytes"])) for d in devices])
        return 0
    print_table(["device", "ops", "busy", "peak memory", "capacity"],
                [(d["device"], d["ops"], human_seconds(d["busy"], unit), human_bytes(d["peak_memory"]),
                  human_bytes(d["memory_bytes"])) for d in devices])
    return 0
