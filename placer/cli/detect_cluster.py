"""`placer detect-cluster -o mine.json`: this machine as a cluster file."""

from __future__ import annotations

from placer.cli.common import add_json_flag, check_name, output_file, quiet_tensorflow


def add_parser(sub) -> None:
    p = sub.add_parser(
        "detect-cluster", help="describe this machine as a cluster file",
        description="Write this machine as a cluster: without GPUs, N logical TensorFlow CPU devices (kind "
                    "cpu-local, sharing one thread pool, as `placer measure --devices N` runs them); with GPUs "
                    "(nvidia-smi), the host CPU and each GPU (kind gpu-local, datasheet rates, memory from "
                    "nvidia-smi) joined by the topology `nvidia-smi topo -m` prints. The CPU's rates are measured "
                    "on one thread (about a second); link rates are nominal until `placer calibrate` measures them.")
    p.add_argument("-o", "--output", required=True, help="cluster JSON file to write")
    p.add_argument("--name", default="mine", help="the cluster's name (default mine)")
    p.add_argument("--cpus", type=int, default=None,
                   help="logical CPU devices on a machine without GPUs (default: the cores this process may use)")
    add_json_flag(p, "the cluster")
    p.set_defaults(run=run)


def run(args) -> int:
    quiet_tensorflow()
    import json

    from placer.cli.output import human_bytes, print_json
    from placer.fileio import write_atomic
    from placer.measure.detect import detect_cluster

    check_name(args.name)
    from placer import presets
    from placer.errors import PlacerError

    if presets.is_preset(args.name):  # commands would then print this machine's results as the preset's
        raise PlacerError(f"--name {args.name!r} is a preset's name; give this machine's cluster a name of its own")
    out_path = output_file(args.output, "-o")
    cluster = detect_cluster(args.name, args.cpus)
    spec = cluster.to_dict()
    write_atomic(out_path, json.dumps(spec, indent=1).encode())
    if args.json:
        print_json(spec)
        return 0
    for d in cluster.devices:
        print(f"{d.name}: {d.kind}, {d.peak_flops / 1e9:.0f} GFLOP/s, {d.memory_bandwidth / 1e9:.1f} GB/s, "
              f"{human_bytes(d.memory_bytes)}")
    if cluster.topology is not None:
        print(f"topology: {len(cluster.topology.switches)} switches, {len(cluster.topology.links)} links")
    print(f"wrote {out_path}")
    return 0
