"""A machine's GPU interconnect from ``nvidia-smi topo -m``, as a cluster topology (`placer.topology`).

``nvidia-smi topo -m`` prints, for every pair of GPUs and NICs, the best
path between them, and each GPU's CPU and NUMA affinity:

- ``NV#``: a bonded set of # NVLinks;
- ``PIX`` (at most one PCIe bridge) and ``PXB`` (several PCIe bridges,
  no host bridge): the two sit behind the same PCIe switch tree;
- ``PHB`` (through a PCIe host bridge, the CPU), ``NODE`` (between host
  bridges of one NUMA node) and ``SYS`` (across NUMA nodes, over the SMP
  interconnect): they meet only at the CPU.

The topology built from it (`topology_from_matrix`):

- a ``cpu-socket`` switch per NUMA node the GPUs have affinity to (N/A: node 0), the host
  CPU device joined to each at its memory bandwidth; with more than one NUMA node, each joined
  to one ``smp`` switch (the sockets' interconnect) at `HostRates.smp_bandwidth`;
- a ``pcie-switch`` per group of GPUs and NICs that are PIX or PXB to each other (a GPU pair
  joined by NVLink shows ``NV#``, hiding its PCIe path, so a NIC both are PXB to groups them), joined
  to its GPUs' NUMA node's socket; each GPU's port at its PCIe bandwidth;
- NVLink: where every GPU pair shows the same ``NV#`` and each GPU would need more links than any
  GPU has (18, H100), the links go through one NVSwitch (``nvswitch`` switch, # links per GPU);
  otherwise each ``NV#`` pair is a direct link of # links. One NVLink moves 25 GB/s per direction in
  generations 2 to 4 (V100, A100, H100).

NICs are grouping evidence only: they join no link (multi-machine clusters are written by hand, as
the ``2x-dgx-a100`` preset). Bandwidths and latencies are nominal; ``placer calibrate`` measures them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from placer.errors import ClusterError
from placer.machines import HOP_LATENCY, NVLINK_LATENCY, PCIE_PORT_LATENCY
from placer.topology import Switch, TopoLink, Topology

NVLINK_PER_LINK = 25e9
"""Bytes/s per direction of one NVLink (NVLink 2, 3 and 4: 50 GB/s bidirectional per link)."""
MAX_NVLINKS_PER_GPU = 18
"""The most NVLinks any GPU has (H100); more than this to its peers means an NVSwitch."""
PCIE_LANE = {1: 0.25e9, 2: 0.5e9, 3: 0.985e9, 4: 1.969e9, 5: 3.938e9, 6: 7.563e9}
"""Bytes/s per lane per direction of each PCIe generation (after line coding)."""

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_GPU = re.compile(r"GPU(\d+)")
_NV = re.compile(r"NV(\d+)")
_PCIE_SAME_SWITCH = ("PIX", "PXB")
_AFFINITY_COLUMNS = ("CPU Affinity", "NUMA Affinity", "GPU NUMA ID")


@dataclass
class TopoMatrix:
    """What ``nvidia-smi topo -m`` says.

    Attributes
    ----------
    gpus : GPU indices, in column order.
    nics : the other columns (``NIC0`` or ``mlx5_0``).
    relation : ``{(a, b): "NV12" | "PIX" | ...}`` for every ordered pair of columns (names as printed).
    numa : each GPU's NUMA node (None where N/A or not printed).
    cpu_affinity : each GPU's CPU list as printed (``"0-23,96-119"``).
    """

    gpus: list[int]
    nics: list[str]
    relation: dict[tuple[str, str], str]
    numa: dict[int, int | None] = field(default_factory=dict)
    cpu_affinity: dict[int, str] = field(default_factory=dict)

    def nvlinks(self, a: int, b: int) -> int:
        """NVLinks between GPUs `a` and `b` (0: none)."""
        m = _NV.fullmatch(self.relation.get((f"GPU{a}", f"GPU{b}"), ""))
        return int(m.group(1)) if m else 0


def _cells(line: str) -> list[str]:
    """The header's cells: tab-separated, or (as pasted, tabs turned to spaces) separated by 2+ spaces
    (its names have single spaces: "CPU Affinity"). A row's cells have none: ``line.split()``."""
    parts = re.split(r"\t+", line.strip()) if "\t" in line else re.split(r"\s{2,}", line.strip())
    return [p.strip() for p in parts if p.strip()]


def parse_topo_matrix(text: str) -> TopoMatrix:
    """Parse ``nvidia-smi topo -m`` output (tabs or spaces, with or without its ANSI underline).

    Raises
    ------
    ClusterError
        If no GPU matrix is found, or a row does not fit its header.
    """
    lines = [_ANSI.sub("", l).rstrip() for l in text.splitlines()]
    # the header names GPU0 first; GPU0's own row follows it with "X"
    head = next((k for k, l in enumerate(lines) if (c := _cells(l)) and c[0] == "GPU0" and c[1:2] != ["X"]), None)
    if head is None:
        raise ClusterError("nvidia-smi topo -m: no matrix found (expected a header line naming GPU0 ...)")
    header = _cells(lines[head])
    columns = [c for c in header if c not in _AFFINITY_COLUMNS]
    extra = [c for c in header if c in _AFFINITY_COLUMNS]
    gpus = [int(m.group(1)) for c in columns if (m := _GPU.fullmatch(c))]
    nics = [c for c in columns if not _GPU.fullmatch(c)]
    relation: dict[tuple[str, str], str] = {}
    numa: dict[int, int | None] = {}
    affinity: dict[int, str] = {}
    for line in lines[head + 1:]:
        if not line.strip():
            continue
        if line.strip().startswith(("Legend", "NIC Legend")):
            break
        cells = line.split()
        if cells[0] not in columns:
            continue
        row, rel = cells[0], cells[1:1 + len(columns)]
        if len(rel) < len(columns):
            raise ClusterError(f"nvidia-smi topo -m: row {row} has {len(rel)} entries for {len(columns)} columns")
        for col, r in zip(columns, rel):
            if col != row:
                relation[(row, col)] = r
        m = _GPU.fullmatch(row)
        if m:
            rest = dict(zip(extra, cells[1 + len(columns):]))
            g = int(m.group(1))
            affinity[g] = rest.get("CPU Affinity", "")
            node = rest.get("NUMA Affinity", "")
            numa[g] = int(node) if node.isdigit() else None
    if not gpus or any((f"GPU{a}", f"GPU{b}") not in relation for a in gpus for b in gpus if a != b) \
            or not all(g in numa for g in gpus):
        raise ClusterError("nvidia-smi topo -m: the GPU rows do not match the header")
    return TopoMatrix(gpus, nics, relation, numa, affinity)


@dataclass(frozen=True)
class HostRates:
    """The host side of a topology: memory bandwidth per NUMA node and the sockets' interconnect."""

    memory_bandwidth: float
    smp_bandwidth: float = 64e9
    """Bytes/s per direction between NUMA nodes (UPI / xGMI; nominal, for calibration to correct)."""


def pcie_bandwidth(generation: int | None, width: int | None) -> float:
    """Bytes/s per direction of a PCIe link (unknown: Gen4 x16)."""
    return PCIE_LANE.get(generation or 4, PCIE_LANE[4]) * (width or 16)


def topology_from_matrix(m: TopoMatrix, host: str, host_rates: HostRates,
                         gpu_pcie: dict[int, float] | None = None) -> Topology:
    """The topology of `m`'s GPUs (devices ``/device:GPU:i``) and the host CPU device `host`.

    `gpu_pcie` gives each GPU's PCIe bandwidth (bytes/s per direction); default Gen4 x16.
    """
    gpu_pcie = gpu_pcie or {}
    dev = {g: f"/device:GPU:{g}" for g in m.gpus}
    nodes = sorted({m.numa.get(g) or 0 for g in m.gpus})
    switches = [Switch(f"numa{n}", "cpu-socket") for n in nodes]
    links = [TopoLink(host, f"numa{n}", host_rates.memory_bandwidth, 0.0, "memory") for n in nodes]
    if len(nodes) > 1:
        switches.append(Switch("smp", "cpu-interconnect"))
        links += [TopoLink(f"numa{n}", "smp", host_rates.smp_bandwidth, HOP_LATENCY, "smp") for n in nodes]
    # PCIe switch groups: union-find over GPUs and NICs that are PIX/PXB to each other
    names = [f"GPU{g}" for g in m.gpus] + list(m.nics)
    parent = {n: n for n in names}

    def root(n: str) -> str:
        while parent[n] != n:
            parent[n] = parent[parent[n]]
            n = parent[n]
        return n

    for (a, b), r in m.relation.items():
        if r in _PCIE_SAME_SWITCH and a in parent and b in parent:
            parent[root(a)] = root(b)
    groups: dict[str, list[int]] = {}
    for g in m.gpus:
        groups.setdefault(root(f"GPU{g}"), []).append(g)
    for k, members in enumerate(sorted(groups.values())):
        sw = f"pcie{k}"
        uplink = max(gpu_pcie.get(g, pcie_bandwidth(None, None)) for g in members)
        switches.append(Switch(sw, "pcie-switch"))
        links.append(TopoLink(sw, f"numa{m.numa.get(members[0]) or 0}", uplink, HOP_LATENCY, "pcie uplink"))
        for g in members:
            links.append(TopoLink(dev[g], sw, gpu_pcie.get(g, pcie_bandwidth(None, None)), PCIE_PORT_LATENCY,
                                  "pcie"))
    pairs = [(a, b) for i, a in enumerate(m.gpus) for b in m.gpus[i + 1:]]
    counts = {m.nvlinks(a, b) for a, b in pairs}
    if len(m.gpus) >= 3 and len(counts) == 1 and (k := counts.pop()) and k * (len(m.gpus) - 1) > MAX_NVLINKS_PER_GPU:
        switches.append(Switch("nvswitch", "nvswitch"))
        links += [TopoLink(dev[g], "nvswitch", k * NVLINK_PER_LINK, NVLINK_LATENCY, f"nvlink-x{k}") for g in m.gpus]
    else:
        for a, b in pairs:
            k = m.nvlinks(a, b)
            if k:
                links.append(TopoLink(dev[a], dev[b], k * NVLINK_PER_LINK, 2 * NVLINK_LATENCY, f"nvlink-x{k}"))
    return Topology(switches, links)
