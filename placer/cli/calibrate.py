"""`placer calibrate CLUSTER -o OUT`: measure the cluster's links on this machine and write them into its spec."""

from __future__ import annotations

from placer.cli.common import CLUSTER_HELP, add_json_flag, output_file, quiet_tensorflow

MAX_COPIES = 10_000
MAX_ROUNDS = 1_000
"""The most copies per timed step and rounds per measurement: every ordered pair of devices is timed
copies x rounds times, so more than these would run for hours (the defaults take seconds)."""


def add_parser(sub) -> None:
    p = sub.add_parser(
        "calibrate", help="time copies between the cluster's devices here; write the measured links",
        description="Time copies between every ordered pair of CLUSTER's devices in TensorFlow (what a copy adds "
                    "to a step, at a small and a large size: latency and bandwidth), and pairs of copies at once "
                    "(both ways over one pair, two out of one device, two into one, and on a topology disjoint "
                    "pairs routed over a shared link) to find shared ports; write CLUSTER with the measured links "
                    "and the raw measurements in its meta.calibration. The devices must exist here: a cluster from "
                    "`placer detect-cluster`, or local:N. Nothing is written until the end.")
    p.add_argument("cluster", help=CLUSTER_HELP)
    p.add_argument("-o", "--output", required=True, help="cluster JSON file to write")
    p.add_argument("--copies", type=int, default=40, help="copies per transfer in one timed step (default 40)")
    p.add_argument("--rounds", type=int, default=8, help="interleaved rounds per measurement (default 8)")
    p.add_argument("--max-concurrent", type=int, default=16,
                   help="pairs of transfers timed together, at most (default 16; 0: none)")
    p.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    add_json_flag(p, "the calibration")
    p.set_defaults(run=run)


def run(args) -> int:
    quiet_tensorflow()
    import json
    import sys

    from placer.cli.common import check_at_least
    from placer.cli.output import human_seconds, print_json, print_table
    from placer.fileio import write_atomic
    from placer.measure.calibrate import TFProber, calibrate
    from placer.presets import load_cluster

    check_at_least(args, "copies", most=MAX_COPIES)
    check_at_least(args, "rounds", most=MAX_ROUNDS)
    check_at_least(args, "max_concurrent", least=0)
    out_path = output_file(args.output, "-o")
    cluster = load_cluster(args.cluster)
    _check_devices(cluster)
    say = None if args.quiet else (lambda text: print(f"{cluster.name}: {text}", file=sys.stderr, flush=True))
    calibrated = calibrate(cluster, TFProber(args.copies, args.rounds), max_concurrent=args.max_concurrent,
                           progress=say)
    write_atomic(out_path, json.dumps(calibrated.to_dict(), indent=1).encode())
    report = calibrated.meta["calibration"]
    if args.json:
        print_json(report)
        return 0
    print_table(["from", "to", "latency", "bandwidth"],
                [(p["from"], p["to"], human_seconds(p["latency"]),
                  "-" if p["bandwidth"] is None else f"{p['bandwidth'] / 1e9:.1f} GB/s") for p in report["pairs"]])
    shared = [c for c in report["concurrent"] if c["shared"]]
    print(f"{len(shared)} of {len(report['concurrent'])} pairs of transfers timed together share a resource")
    print(f"wrote {out_path}")
    return 0


def _check_devices(cluster) -> None:
    """A PlacerError for a device TensorFlow cannot have here (a GPU it does not list), before anything runs."""
    from placer.errors import PlacerError

    gpus = [d.name for d in cluster.devices if d.name.startswith("/device:GPU:")]
    others = [d.name for d in cluster.devices if not d.name.startswith(("/device:CPU:", "/device:GPU:"))]
    if others:
        raise PlacerError(f"cluster {cluster.name!r}: device {others[0]} is not a local device (/device:CPU:k or "
                          "/device:GPU:k); calibrate a cluster of this machine (placer detect-cluster)")
    if gpus:
        import tensorflow as tf

        have = len(tf.config.list_physical_devices("GPU"))
        missing = [g for g in gpus if int(g.rpartition(":")[2]) >= have]
        if missing:
            raise PlacerError(f"cluster {cluster.name!r}: TensorFlow here has {have} GPU(s), not {missing[0]} "
                              "(a GPU build of TensorFlow is needed to time GPU copies)")
