"""Pinning: a device for every node of a GraphDef, from a placement of its OpGraph.

Placements name the OpGraph's ops, which are TF's node names; the nodes the
importer folded away (``Const``, ``NoOp``) take the device of their first
consumer (else their producer), as a constant lives where it is used.
Device names are made canonical (``/device:CPU:1``) so ``/cpu:1`` and the
fully qualified ``/job:localhost/replica:0/task:0/device:CPU:1`` agree.
"""

from __future__ import annotations

from placer.errors import PlacementError
from placer.graph import OpGraph
from placer.importers.graphdef import node_of
from placer.placement import Placement, canonical_device_name


def canonical_device(name: str) -> str:
    """``"/job:localhost/replica:0/task:0/device:CPU:1"``, ``"/cpu:1"``, ``"CPU:1"`` -> ``"/device:CPU:1"``
    (`placer.placement.canonical_device_name`, which placements read device names with too).

    Raises
    ------
    PlacementError
        If the name is not a TensorFlow device name with a type.
    """
    canonical = canonical_device_name(name)
    if canonical is None:
        raise PlacementError(f"{name!r} is not a TensorFlow device name (e.g. /device:CPU:0)")
    return canonical


def node_devices(graph: OpGraph, graph_def, placement: Placement) -> dict[str, str]:
    """Canonical device for every node of `graph_def` from a placement of `graph`'s ops.

    Raises
    ------
    PlacementError
        If the placement misses an op of the graph, names an op the graph lacks,
        or names something that is not a device.
    """
    unknown = [name for name in placement.devices if name not in graph.index]
    if unknown:
        raise PlacementError(f"placement names op {unknown[0]!r} which graph {graph.name!r} does not have"
                             + (f" (and {len(unknown) - 1} more)" if len(unknown) > 1 else ""))
    missing = [op.name for op in graph if op.name not in placement.devices]
    if missing:
        raise PlacementError(f"placement has no device for op {missing[0]!r}"
                             + (f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""))
    canon: dict[str, str] = {}
    devices = {}
    for op, dev in placement.devices.items():
        if dev not in canon:
            canon[dev] = canonical_device(dev)
        devices[op] = canon[dev]
    consumers: dict[str, list[str]] = {}
    producers: dict[str, list[str]] = {}
    for node in graph_def.node:
        for src in node.input:
            p = node_of(src)
            consumers.setdefault(p, []).append(node.name)
            producers.setdefault(node.name, []).append(p)
    fallback = devices[graph.ops[0].name]

    def resolve(name: str, seen: set[str]) -> str:
        if name in devices:
            return devices[name]
        seen.add(name)
        for nxt in consumers.get(name, []) + producers.get(name, []):
            if nxt not in seen:
                dev = resolve(nxt, seen)
                if dev is not None:
                    devices[name] = dev
                    return dev
        return None  # type: ignore[return-value]

    for node in graph_def.node:
        if node.name not in devices:
            devices[node.name] = resolve(node.name, set()) or fallback
    return devices
