"""`placer measure GRAPH --placement P --devices N`: run a placed training step in TensorFlow and time it."""

from __future__ import annotations

from placer.cli.common import add_json_flag, add_placement_option, quiet_tensorflow


# TensorFlow starts the whole inter-op pool with the session (about 0.1 MB a thread here): a million threads
# took all memory until the kernel killed the process, with no word; more threads than cores gain nothing.
MAX_INTER_OP_THREADS = 1024


def add_parser(sub) -> None:
    p = sub.add_parser(
        "measure", help="run a placed graph for real in TensorFlow and time its steps",
        description="Run the TensorFlow training step behind GRAPH with every op pinned to its device from "
                    "PLACEMENT (variables created, random inputs of the right shapes) on the devices TensorFlow "
                    "has: GPUs where present, else N logical CPU devices (one thread per kernel). Prints the "
                    "median step time and its spread (p90 - p10, relative to the median).")
    p.add_argument("graph", help="graph file with its GraphDef embedded, or a GraphDef (.pb/.pbtxt)")
    add_placement_option(p)
    p.add_argument("--devices", type=int, default=2, help="logical CPU devices TensorFlow makes (default 2)")
    p.add_argument("--graphdef", help="the GraphDef GRAPH was imported from (when not embedded in it)")
    p.add_argument("--warmup", type=int, default=3, help="untimed steps first (default 3)")
    p.add_argument("--runs", type=int, default=10, help="timed steps (default 10)")
    p.add_argument("--inter-op-threads", type=int, default=0,
                   help="TensorFlow's inter-op thread pool (default 0: TF's choice, the core count; at most 1024)")
    p.add_argument("--grappler", action="store_true",
                   help="let grappler rewrite the graph (fusions, folding); off by default so the graph run "
                        "is exactly the graph placed")
    p.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    add_json_flag(p, "the result")
    p.set_defaults(run=run)


class Progress:
    """Progress lines on stderr: each phase as it starts, and the steps (at most one line a second, and each
    phase's last), since building a big graph and each of its steps take seconds to minutes."""

    EVERY_SECONDS = 1.0

    def __init__(self, quiet: bool, name: str):
        import time

        self.quiet, self.name = quiet, name
        self.t0 = time.monotonic()
        self.last = -float("inf")

    def note(self, text: str) -> None:
        import sys
        import time

        if not self.quiet:
            print(f"{self.name}: {text} [{time.monotonic() - self.t0:.0f} s]",
                  file=sys.stderr, flush=True)
            self.last = time.monotonic()

    def step(self, phase: str, done: int, total: int) -> None:
        """The progress callback of `placer.measure.runner.PlacedStep.measure` and
        `placer.measure.profile.profile_ops` (whose traced steps are phase "profiled")."""
        import time

        if phase == "traced":
            self.note("traced one more step to see where ops ran")
        elif done == total or time.monotonic() - self.last >= self.EVERY_SECONDS:
            label = {"warmup": "warm-up", "profiled": "traced", "pooled": "pooled and one-thread"}.get(phase, phase)
            self.note(f"{label} step {done}/{total}")


def _check_devices(wanted: set[str], num_cpus: int) -> None:
    """A PlacementError for a device (canonical name) TensorFlow will not have, before the slow build starts
    (`PlacedStep` checks the session's own list again): the CPUs are ``--devices``, the GPUs this machine's."""
    from collections import Counter

    from placer.cli.output import plural
    from placer.errors import PlacementError

    cpus = sorted(int(d.rpartition(":")[2]) for d in wanted if d.startswith("/device:CPU:"))
    if cpus and cpus[-1] >= num_cpus:
        raise PlacementError(f"placement uses device /device:CPU:{cpus[-1]}, which TensorFlow does not have here "
                             f"(--devices {num_cpus} makes {plural(num_cpus, 'logical CPU device')}): "
                             f"give --devices {cpus[-1] + 1}")
    others = sorted(d for d in wanted if not d.startswith("/device:CPU:"))
    if others:
        import tensorflow as tf

        counts = Counter(d.device_type for d in tf.config.list_physical_devices())  # starts no device
        have = {f"/device:{kind}:{k}" for kind, n in counts.items() for k in range(n)}
        lacking = [d for d in others if d not in have]
        if lacking:
            gpus = counts.get("GPU", 0)
            raise PlacementError(
                f"placement uses device {lacking[0]}, which TensorFlow does not have here "
                f"({plural(num_cpus, 'logical CPU device')}, {plural(gpus, 'GPU') if gpus else 'no GPU'}): "
                f"was it made for another cluster? To measure here, place the graph on cluster local:{num_cpus}")


def run(args) -> int:
    quiet_tensorflow()
    from placer.cli.output import human_seconds, print_json, print_table
    from placer.errors import PlacerError
    from placer.measure.pinning import node_devices
    from placer.measure.runner import PlacedStep
    from placer.measure.source import load_runnable
    from placer.placement import load_placement
    from placer.presets import MAX_LOCAL_DEVICES

    if not 1 <= args.devices <= MAX_LOCAL_DEVICES:
        raise PlacerError(f"--devices must be an integer from 1 to {MAX_LOCAL_DEVICES}, got {args.devices}")
    if args.warmup < 0 or args.runs < 1:
        raise PlacerError(f"need --warmup >= 0 and --runs >= 1, got {args.warmup} and {args.runs}")
    if not 0 <= args.inter_op_threads <= MAX_INTER_OP_THREADS:
        raise PlacerError(f"--inter-op-threads must be between 0 and {MAX_INTER_OP_THREADS}, "
                          f"got {args.inter_op_threads}")
    placement = load_placement(args.placement)
    graph, graph_def = load_runnable(args.graph, args.graphdef, placed=placement.devices)
    # a placement that does not fit: its error alone, no progress first
    _check_devices(set(node_devices(graph, graph_def, placement).values()), args.devices)
    progress = Progress(args.quiet, graph.name)
    progress.note(f"building the placed step in TensorFlow ({len(graph_def.node)} nodes)")
    with PlacedStep(graph, graph_def, placement, args.devices, inter_op_threads=args.inter_op_threads,
                    optimize=args.grappler) as step:
        progress.note(f"running {args.warmup} warm-up and {args.runs} timed steps")
        m = step.measure(args.warmup, args.runs, progress=progress.step)
    out = {"graph": graph.name, "method": placement.method, "simulated_step_time": placement.step_time,
           **m.to_dict()}
    if args.json:
        print_json(out)
        return 0
    print(f"{graph.name} ({placement.method}): median step {human_seconds(m.median)} over {len(m.step_times)} runs, "
          f"spread {100 * m.spread:.1f}% (min {human_seconds(min(m.step_times))}, "
          f"max {human_seconds(max(m.step_times))})"
          + (f"; simulated {human_seconds(placement.step_time)}" if placement.step_time else ""))
    print_table(["device", "nodes run"], sorted(m.ops_per_device.items()))
    return 0
