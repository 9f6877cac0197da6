"""`placer clusters`: list the cluster presets."""

from __future__ import annotations


def add_parser(sub) -> None:
    p = sub.add_parser("clusters", help="list cluster presets",
                       description="List the named cluster presets (use a name or a JSON file with --cluster).")
    p.add_argument("name", nargs="?", help="show one preset in full (its JSON spec)")
    p.add_argument("--json", action="store_true", help="print as JSON")
    p.set_defaults(run=run)


def run(args) -> int:
    from placer import presets
    from placer.cli.output import human_bytes, print_json, print_table

    if args.name is not None:
        print_json(presets.get(args.name).to_dict())
        return 0
    clusters = presets.all_presets()
    if args.json:
        print_json([c.to_dict() for c in clusters])
        return 0
    rows = []
    for c in clusters:
        kinds: dict[str, int] = {}
        for d in c.devices:
            kinds[d.kind] = kinds.get(d.kind, 0) + 1
        rows.append((c.name, " + ".join(f"{n} {k}" for k, n in kinds.items()),
                     human_bytes(max(d.memory_bytes for d in c.devices)), c.meta.get("description", "")))
    rows.append(("local:N", "N cpu-local", "", "N logical CPU devices of this machine (local = local:2)"))
    print_table(["name", "devices", "max memory", "description"], rows)
    return 0
