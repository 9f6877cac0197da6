"""`placer import-split WORKLOAD SPLIT -o placement.json`: an MSR split as our Placement."""

from __future__ import annotations

from placer.cli.common import add_json_flag, output_file


def add_parser(sub) -> None:
    p = sub.add_parser(
        "import-split", help="convert an MSR dnn-partitioning split file into a placement",
        description="Convert one of the MSR dnn-partitioning split files (human-experts/*.json, "
                    "reproduced_outputs/*.dp.json) of WORKLOAD into a placement file. fpgas[i] becomes "
                    "/device:GPU:i and cpus[j] /device:CPU:j, matching `placer import WORKLOAD --cluster-out`; "
                    "nodes the split leaves out (backward nodes in the experts' training splits) go with "
                    "their colour class.")
    p.add_argument("workload", help="the MSR workload JSON the split belongs to")
    p.add_argument("split", help="the split JSON ({'fpgas': [{'nodes': [ids]}], 'cpus': [...], 'maxLoad': x})")
    p.add_argument("-o", "--output", required=True, help="placement file to write")
    add_json_flag(p, "a summary")
    p.set_defaults(run=run)


def run(args) -> int:
    from placer.cli.output import print_json
    from placer.importers.msr import load_split
    from placer.placement import save_placement

    output_file(args.output, "-o", (args.split, args.workload))
    placement = load_split(args.workload, args.split)
    save_placement(placement, args.output)
    used = sorted(set(placement.devices.values()))
    summary = {"output": args.output, "graph": placement.graph, "cluster": placement.cluster,
               "method": placement.method, "ops": len(placement.devices), "devices_used": used,
               "published_max_load": placement.meta.get("published_max_load")}
    if args.json:
        print_json(summary)
    else:
        published = summary["published_max_load"]
        print(f"wrote {args.output}: {len(placement.devices)} ops of {placement.graph} on {len(used)} devices"
              + (f" (published maxLoad {published:g})" if published is not None else ""))
    return 0
