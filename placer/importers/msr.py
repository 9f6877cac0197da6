"""Import the MSR dnn-partitioning workloads (Tarnawski et al., NeurIPS 2020).

A workload is one JSON object: ``maxSizePerFPGA``, ``maxFPGAs``, ``maxCPUs``,
``nodes[]`` (``id``, ``name``, ``fpgaLatency``, ``cpuLatency``, ``size``,
``supportedOnFpga``, ``isBackwardNode``, ``colorClass``) and ``edges[]``
(``sourceId``, ``destId``, ``cost``, ``size``). "FPGA" means any accelerator.

The profiled numbers are kept exactly, so that our throughput objective
reproduces the authors' published ``maxLoad`` values:

- ``fpgaLatency`` -> ``cost["gpu"]``, ``cpuLatency`` -> ``cost["cpu"]``,
  unchanged (the dataset's time unit, milliseconds in the layer graphs; our
  simulator and objectives read them as seconds, so every figure computed on
  these graphs is in the dataset's unit);
- ``size`` -> ``param_bytes`` (memory the node holds on its device);
- an edge's ``cost`` -> the source op's ``transfer_time`` (the file gives one
  cost per source node, the same on all its out-edges; a file where they
  differ is rejected);
- the largest ``size`` of a node's out-edges -> its ``output_bytes``;
- ``colorClass`` -> ``colocation`` (the class number as a string; nodes
  without one get no key, as the authors' solver gives them a class of their
  own);
- ``isBackwardNode`` -> op type ``"Backward"``, otherwise ``"Forward"``;
- ``supportedOnFpga: 0`` -> the op is listed in ``meta["cpu_only_ops"]``.

Op names are the nodes' ``name``. They are unique in every published file; if
a file repeats a name, every node carrying it is renamed ``"<name>#<id>"``
(ids must be unique). The split files (the authors' ``human-experts/`` and
``reproduced_outputs/``) refer to nodes by id; `placement_from_split` turns
one into our Placement.

The workload also defines its cluster (`cluster_from_msr`): ``maxFPGAs``
accelerators with ``maxSizePerFPGA`` bytes each, plus ``maxCPUs`` CPUs with
no memory limit (as in the paper's model).
"""

from __future__ import annotations

import math
import os
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from placer.cluster import Cluster, Device, Link
from placer.errors import ModelImportError
from placer.fileio import parse_json_bytes, read_json_file
from placer.graph import Op, OpGraph

if TYPE_CHECKING:
    from placer.placement import Placement

FORMAT = "msr"
SOURCE = "msr-fiddle/dnn-partitioning (Tarnawski et al., NeurIPS 2020), commit b207b6a, MIT licence"
TIME_UNIT_NOTE = (
    "the dataset's, unchanged (milliseconds in the layer graphs): "
    "step times and loads computed on this graph are in that unit, not seconds"
)
SECONDS_PER_TIME_UNIT = 1e-3
"""The dataset's time unit (milliseconds: the layer graphs' latencies are PipeDream's GPU profiles); the
importer keeps the numbers, and the command line multiplies by this to print them as times."""
# The CPU has no memory limit in the paper's model; a cluster needs a number.
CPU_MEMORY_BYTES = float(2**50)
# Bytes per time unit of the link used only for ops without a transfer_time
# (ops without out-edges): the inference graphs' edges cost bytes / 2 GiB.
LINK_BANDWIDTH = float(2**31)

_NODE_KEYS = ("id", "fpgaLatency", "cpuLatency")
_EDGE_KEYS = ("sourceId", "destId", "cost")


def sniff(data: Any) -> bool:
    """Whether parsed JSON looks like an MSR workload (used to detect the format)."""
    return isinstance(data, dict) and "maxFPGAs" in data and "nodes" in data and "edges" in data


def _number(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise ModelImportError(f"MSR workload: {what} must be a finite non-negative number, got {value!r}")
    return float(value)


def _count(data: dict, key: str, where: str) -> int:
    value = data.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != int(value) or value < 0:
        raise ModelImportError(f"{where}: {key!r} must be a non-negative integer, got {value!r}")
    return int(value)


def _check_workload(data: Any, where: str) -> None:
    if not sniff(data):
        raise ModelImportError(f"{where}: not an MSR workload (expected an object with 'maxFPGAs', 'nodes', 'edges')")
    if not isinstance(data["nodes"], list) or not data["nodes"]:
        raise ModelImportError(f"{where}: 'nodes' must be a non-empty list")
    if not isinstance(data["edges"], list):
        raise ModelImportError(f"{where}: 'edges' must be a list")


def id_to_name(data: dict[str, Any], where: str = "MSR workload") -> dict[int, str]:
    """Op name of every node id, applying the duplicate-name rule of this module.

    Raises
    ------
    ModelImportError
        If a node lacks an id or two nodes share one.
    """
    _check_workload(data, where)
    ids: list[int] = []
    raw_names: list[str] = []
    for k, node in enumerate(data["nodes"]):
        if not isinstance(node, dict):
            raise ModelImportError(f"{where}: node #{k} is not an object")
        nid = node.get("id")
        if isinstance(nid, bool) or not isinstance(nid, int):
            raise ModelImportError(f"{where}: node #{k}: 'id' must be an integer, got {nid!r}")
        ids.append(nid)
        name = node.get("name")
        raw_names.append(str(nid) if name is None or name == "" else str(name))
    seen: set[int] = set()
    for nid in ids:
        if nid in seen:
            raise ModelImportError(f"{where}: node id {nid} appears twice")
        seen.add(nid)
    counts: dict[str, int] = {}
    for name in raw_names:
        counts[name] = counts.get(name, 0) + 1
    return {nid: (f"{name}#{nid}" if counts[name] > 1 else name) for nid, name in zip(ids, raw_names)}


def graph_from_msr(data: dict[str, Any], name: str, where: str = "MSR workload") -> OpGraph:
    """Build the OpGraph of a parsed MSR workload (see the module docstring for the mapping).

    Raises
    ------
    ModelImportError
        Naming the node or edge that is malformed: a missing field, a negative
        number, an edge to an unknown id, a self-loop, or one node's out-edges
        with different costs. Cycles are reported by `OpGraph` (a GraphError).
    """
    names = id_to_name(data, where)
    inputs: dict[int, list[str]] = {nid: [] for nid in names}
    transfer: dict[int, float] = {}
    out_bytes: dict[int, float] = {}
    for k, edge in enumerate(data["edges"]):
        if not isinstance(edge, dict) or any(key not in edge for key in _EDGE_KEYS):
            raise ModelImportError(f"{where}: edge #{k} must be an object with {', '.join(_EDGE_KEYS)}")
        src, dst = edge["sourceId"], edge["destId"]
        for end in (src, dst):
            if end not in names:
                raise ModelImportError(f"{where}: edge #{k} names node id {end!r}, which is not in 'nodes'")
        if src == dst:
            raise ModelImportError(f"{where}: edge #{k} is a self-loop on node {names[src]!r}")
        cost = _number(edge["cost"], f"edge #{k} 'cost'")
        if src in transfer and not math.isclose(transfer[src], cost, rel_tol=1e-9, abs_tol=1e-12):
            raise ModelImportError(
                f"{where}: node {names[src]!r} has out-edges with different costs ({transfer[src]} and {cost}); "
                "the format gives one transfer cost per node"
            )
        transfer[src] = cost
        out_bytes[src] = max(out_bytes.get(src, 0.0), _number(edge.get("size", 0.0), f"edge #{k} 'size'"))
        if names[src] not in inputs[dst]:
            inputs[dst].append(names[src])

    class_sizes: dict[Any, int] = {}
    for node in data["nodes"]:
        if node.get("colorClass") is not None:
            class_sizes[node["colorClass"]] = class_sizes.get(node["colorClass"], 0) + 1

    ops: list[Op] = []
    cpu_only: list[str] = []
    backward = 0
    for node in data["nodes"]:
        nid = node["id"]
        op_name = names[nid]
        for key in _NODE_KEYS:
            if key not in node:
                raise ModelImportError(f"{where}: node {op_name!r} has no {key!r}")
        is_backward = bool(node.get("isBackwardNode", 0))
        backward += is_backward
        if not node.get("supportedOnFpga", 1):
            cpu_only.append(op_name)
        cc = node.get("colorClass")
        ops.append(Op(
            name=op_name,
            op="Backward" if is_backward else "Forward",
            inputs=inputs[nid],
            output_bytes=out_bytes.get(nid, 0.0),
            param_bytes=_number(node.get("size", 0.0), f"node {op_name!r} 'size'"),
            cost={"gpu": _number(node["fpgaLatency"], f"node {op_name!r} 'fpgaLatency'"),
                  "cpu": _number(node["cpuLatency"], f"node {op_name!r} 'cpuLatency'")},
            colocation=str(cc) if cc is not None and class_sizes[cc] > 1 else None,
            transfer_time=transfer.get(nid),
        ))
    meta: dict[str, Any] = {
        "source": SOURCE,
        "format": FORMAT,
        "time_unit": TIME_UNIT_NOTE,
        "max_accelerators": _count(data, "maxFPGAs", where),
        "max_cpus": _count(data, "maxCPUs", where) if "maxCPUs" in data else 1,
        "accelerator_memory_bytes": _number(data.get("maxSizePerFPGA", 0.0), "'maxSizePerFPGA'"),
        "backward_ops": backward,
    }
    if cpu_only:
        meta["cpu_only_ops"] = cpu_only
    renamed = [op.name for op, node in zip(ops, data["nodes"]) if op.name != str(node.get("name", op.name))]
    if renamed:
        meta["renamed_duplicates"] = renamed
    return OpGraph(name, ops, meta)


def cluster_from_msr(data: dict[str, Any], name: str, where: str = "MSR workload") -> Cluster:
    """The workload's cluster: ``maxCPUs`` CPUs, then ``maxFPGAs`` accelerators.

    Devices are ``/device:CPU:i`` (kind ``cpu``, no memory limit) and
    ``/device:GPU:i`` (kind ``gpu``, ``maxSizePerFPGA`` bytes). Their peak
    rates are those of the presets' host CPU and V100; they matter only for
    ops without a profiled cost, and every imported op has one.
    """
    from placer.machines import E5_2698V4_X2 as HOST_CPU, V100_PCIE

    _check_workload(data, where)
    n_acc = _count(data, "maxFPGAs", where)
    n_cpu = _count(data, "maxCPUs", where) if "maxCPUs" in data else 1
    if n_acc + n_cpu == 0:
        raise ModelImportError(f"{where}: 'maxFPGAs' and 'maxCPUs' are both 0; the cluster would have no device")
    memory = _number(data.get("maxSizePerFPGA"), "'maxSizePerFPGA'")
    if memory <= 0:
        raise ModelImportError(f"{where}: 'maxSizePerFPGA' must be positive")
    cpu = {**HOST_CPU, "memory_bytes": CPU_MEMORY_BYTES, "op_overhead": 0.0}
    gpu = {**V100_PCIE, "memory_bytes": memory, "op_overhead": 0.0}
    devices = [Device(f"/device:CPU:{i}", **cpu) for i in range(n_cpu)]
    devices += [Device(f"/device:GPU:{i}", **gpu) for i in range(n_acc)]
    return Cluster(
        name, devices, default_link=Link(bandwidth=LINK_BANDWIDTH, latency=0.0),
        meta={"source": SOURCE, "description": f"{n_acc} accelerators of {memory:.0f} bytes + {n_cpu} CPU(s), "
                                                "from an MSR workload", "time_unit": TIME_UNIT_NOTE},
    )


def workload_name(path: str | os.PathLike) -> str:
    """Graph name for a workload file: its stem (``resnet50_inference``)."""
    return Path(path).name.removesuffix(".gz").removesuffix(".json")


def read_workload(path: str | os.PathLike) -> dict[str, Any]:
    """Parse and sanity-check an MSR workload file."""
    data = read_json_file(path, "MSR workload")
    _check_workload(data, f"MSR workload {str(path)!r}")
    return data


def load(path: str | os.PathLike) -> OpGraph:
    """Import an MSR workload file as an OpGraph named after the file's stem."""
    return graph_from_msr(read_workload(path), workload_name(path), f"MSR workload {str(path)!r}")


def load_cluster(path: str | os.PathLike) -> Cluster:
    """The cluster an MSR workload file defines, named ``msr-<stem>``."""
    return cluster_from_msr(read_workload(path), f"msr-{workload_name(path)}", f"MSR workload {str(path)!r}")


def placement_from_split(data: dict[str, Any], split: Any, graph_name: str, cluster_name: str,
                         where: str = "MSR split") -> "Placement":
    """Turn one of the authors' split files into our Placement.

    A split is ``{"fpgas": [{"nodes": [id...]}...], "cpus": [...], "maxLoad": x}``:
    ``fpgas[i]`` becomes ``/device:GPU:i`` and ``cpus[j]`` ``/device:CPU:j``.
    The experts' splits of training graphs list only forward nodes; as the
    authors' evaluator does, a node missing from the split goes to the device
    of the nodes sharing its ``colorClass``. The published ``maxLoad`` (absent
    or -1 in the expert files) is kept in ``meta["published_max_load"]``.

    Raises
    ------
    ModelImportError
        If the split names an unknown id or one id twice, uses more devices
        than the workload has, or leaves a node whose device cannot be
        inferred (no colour-class mate placed, or mates on two devices).
    """
    from placer.placement import Placement

    names = id_to_name(data)
    if not isinstance(split, dict) or not ({"fpgas", "cpus"} & set(split)) \
            or not isinstance(split.get("fpgas", []), list) or not isinstance(split.get("cpus", []), list):
        raise ModelImportError(f"{where}: expected an object with 'fpgas' and 'cpus' lists of {{'nodes': [ids]}}")
    limits = {"fpgas": _count(data, "maxFPGAs", "MSR workload"),
              "cpus": _count(data, "maxCPUs", "MSR workload") if "maxCPUs" in data else 1}
    prefix = {"fpgas": "/device:GPU:", "cpus": "/device:CPU:"}
    device_of: dict[int, str] = {}
    for key in ("fpgas", "cpus"):
        machines = split.get(key, [])
        used = [k for k, m in enumerate(machines) if isinstance(m, dict) and m.get("nodes")]
        if used and used[-1] >= limits[key]:
            raise ModelImportError(f"{where}: uses {key}[{used[-1]}] but the workload has {limits[key]} {key}")
        for k, machine in enumerate(machines):
            if not isinstance(machine, dict) or not isinstance(machine.get("nodes", []), list):
                raise ModelImportError(f"{where}: {key}[{k}] must be an object with a 'nodes' list")
            for nid in machine.get("nodes", []):
                if isinstance(nid, bool) or nid not in names:  # true == 1 in Python: not an id
                    raise ModelImportError(f"{where}: {key}[{k}] names node id {nid!r}, which the workload lacks")
                if nid in device_of:
                    raise ModelImportError(f"{where}: node id {nid} is placed twice")
                device_of[nid] = f"{prefix[key]}{k}"

    by_class: dict[Any, set[str]] = {}
    for node in data["nodes"]:
        if node["id"] in device_of and node.get("colorClass") is not None:
            by_class.setdefault(node["colorClass"], set()).add(device_of[node["id"]])
    inferred = 0
    for node in data["nodes"]:
        nid = node["id"]
        if nid in device_of:
            continue
        choices = by_class.get(node.get("colorClass"), set()) if node.get("colorClass") is not None else set()
        if len(choices) != 1:
            reason = "no node of its colorClass is placed" if not choices else "its colorClass is split"
            raise ModelImportError(f"{where}: node {names[nid]!r} (id {nid}) is not placed and {reason}")
        device_of[nid] = next(iter(choices))
        inferred += 1

    meta: dict[str, Any] = {"source": SOURCE}
    published = split.get("maxLoad")
    if published is not None:  # the datasets write -1 where none was published
        if isinstance(published, bool) or not isinstance(published, (int, float)) or not math.isfinite(published):
            raise ModelImportError(f"{where}: 'maxLoad' must be a number (-1: none published), got {published!r}")
        if published >= 0:
            meta["published_max_load"] = float(published)
    if inferred:
        meta["inferred_from_color_class"] = inferred
    return Placement(graph=graph_name, cluster=cluster_name, method="msr-split",
                     devices={names[nid]: dev for nid, dev in device_of.items()}, objective="throughput", meta=meta)


def load_split(workload_path: str | os.PathLike, split_path: str | os.PathLike) -> "Placement":
    """Read a workload and one of its split files; the placement names the
    graph and cluster as `load` and `load_cluster` do."""
    data = read_workload(workload_path)
    split = read_json_file(split_path, "MSR split")
    stem = workload_name(workload_path)
    placement = placement_from_split(data, split, stem, f"msr-{stem}", f"MSR split {str(split_path)!r}")
    return replace(placement, method=f"msr-split:{workload_name(split_path)}")


# -- the format registry's entry points (`placer.importers.register_format`) --
def sniff_bytes(raw: bytes, path: str | None = None) -> bool:
    """Cheap content test: a JSON object with the MSR top-level key ``maxFPGAs``."""
    return raw.lstrip()[:1] == b"{" and b'"maxFPGAs"' in raw


def load_bytes(raw: bytes, name: str) -> OpGraph:
    """Parse workload bytes into an OpGraph called `name`."""
    data = parse_json_bytes(raw, "MSR workload")
    return graph_from_msr(data, name)
