"""Import PipeDream layer profiles (msr-fiddle/pipedream, ``profiler/*/profiles/<model>/graph.txt``).

A profile is text: one line per layer,

    nodeN -- <module> -- forward_compute_time=F, backward_compute_time=B, activation_size=A, parameter_size=P

(times in milliseconds, sizes in bytes; ``A`` may be a list ``[a; b; c]`` for
a layer with several outputs), and one line per edge: a tab, ``nodeA -- nodeB``.

Mapping, keeping the profile exact:

- op name = ``nodeN``; op type = the module's class (``Conv2d``, ``LSTM``...);
- ``cost["gpu"]`` = (F + B) / 1000 seconds: one training step of the layer
  on the profiled GPU (the profile states neither GPU nor batch size; the
  profiler's own example uses batch 128);
- ``cost["cpu"]`` = 10 x that: synthetic (no CPU was profiled), the same rule
  as the MSR layer graphs built from these profiles, so a CPU is never free;
- ``output_bytes`` = A (the sum for a list), ``param_bytes`` = P.

Data loading: in alexnet, resnet18 and squeezenet1_0 the ``Input`` layer's
forward time (474-636 ms) is the data loader, not computation. The rule that
finds exactly those: an ``Input`` layer whose forward time exceeds all other
layers' time together is zeroed, and ``meta["zeroed_input_ms"]`` says so.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from placer.errors import ModelImportError
from placer.graph import Op, OpGraph

FORMAT = "pipedream"
SOURCE = "msr-fiddle/pipedream (Narayanan et al., SOSP 2019), commit 11c40c0, MIT licence"
CPU_FACTOR = 10.0

_NUMBER = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"
_NODE = re.compile(
    rf"^(?P<name>node\d+) -- (?P<module>.*) -- forward_compute_time=(?P<f>{_NUMBER}), "
    rf"backward_compute_time=(?P<b>{_NUMBER}), activation_size=(?P<a>\[[^\]]*\]|{_NUMBER}), "
    rf"parameter_size=(?P<p>{_NUMBER})\s*$"
)
_EDGE = re.compile(r"^\t(?P<src>\S+) -- (?P<dst>\S+)\s*$")
_SNIFF = re.compile(rb"^node\d+ -- .* -- forward_compute_time=")


def sniff_bytes(raw: bytes, path: str | None = None) -> bool:
    """Cheap content test: the first line is a PipeDream node line."""
    return _SNIFF.match(raw.lstrip()[:4096]) is not None


def _activation_bytes(text: str, where: str) -> float:
    parts = text.strip("[]").split(";") if text.startswith("[") else [text]
    try:
        values = [float(p) for p in parts if p.strip()]
    except ValueError:
        raise ModelImportError(f"{where}: activation_size {text!r} is not a number or a list of numbers") from None
    if any(v < 0 for v in values):
        raise ModelImportError(f"{where}: activation_size must not be negative, got {text!r}")
    return float(sum(values))


def graph_from_text(text: str, name: str, where: str = "PipeDream profile") -> OpGraph:
    """Parse a ``graph.txt`` into an OpGraph (see the module docstring for the mapping).

    Raises
    ------
    ModelImportError
        Naming the line that is malformed, a layer listed twice, an edge to an
        unknown layer, a negative time or size, or an empty profile. Cycles are
        reported by `OpGraph` (a GraphError).
    """
    rows: dict[str, dict[str, Any]] = {}
    edges: list[tuple[str, str, int]] = []
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        if line.startswith("\t"):
            m = _EDGE.match(line)
            if m is None:
                raise ModelImportError(f"{where}: line {lineno}: expected an edge '\\tnodeA -- nodeB', "
                                       f"got {line.strip()!r}")
            edges.append((m["src"], m["dst"], lineno))
            continue
        m = _NODE.match(line)
        if m is None:
            raise ModelImportError(f"{where}: line {lineno}: not a PipeDream node line: {line[:80]!r}")
        if m["name"] in rows:
            raise ModelImportError(f"{where}: line {lineno}: layer {m['name']!r} is listed twice")
        fwd, bwd, params = float(m["f"]), float(m["b"]), float(m["p"])
        if min(fwd, bwd, params) < 0:
            raise ModelImportError(f"{where}: line {lineno}: layer {m['name']!r} has a negative time or size")
        rows[m["name"]] = {
            "module": m["module"].strip(), "fwd": fwd, "bwd": bwd, "params": params,
            "act": _activation_bytes(m["a"], f"{where}: line {lineno}"), "inputs": [],
        }
    if not rows:
        raise ModelImportError(f"{where}: no layers")
    for src, dst, lineno in edges:
        for end in (src, dst):
            if end not in rows:
                raise ModelImportError(f"{where}: line {lineno}: edge names layer {end!r}, which is not listed")
        if src not in rows[dst]["inputs"]:
            rows[dst]["inputs"].append(src)

    meta: dict[str, Any] = {
        "source": SOURCE, "format": FORMAT,
        "time_unit": "seconds (the profile's milliseconds / 1000), forward + backward of one training step",
        "cpu_cost": f"synthetic: {CPU_FACTOR:g} x the GPU time (no CPU was profiled)",
    }
    total = sum(r["fwd"] + r["bwd"] for r in rows.values())
    for layer, r in rows.items():
        if _module_type(r["module"]).startswith("Input") and r["fwd"] > total - r["fwd"] - r["bwd"]:
            meta.setdefault("zeroed_input_ms", {})[layer] = r["fwd"]
            r["fwd"] = 0.0
    if "zeroed_input_ms" in meta:
        meta["zeroed_input_note"] = ("the Input layer's forward time is data loading (it exceeds all other "
                                     "layers together); zeroed")
    ops = []
    for layer, r in rows.items():
        seconds = (r["fwd"] + r["bwd"]) / 1000.0
        ops.append(Op(name=layer, op=_module_type(r["module"]), inputs=r["inputs"], output_bytes=r["act"],
                      param_bytes=r["params"], cost={"gpu": seconds, "cpu": CPU_FACTOR * seconds}))
    return OpGraph(name, ops, meta)


def _module_type(module: str) -> str:
    """``Conv2d(3, 64, ...)`` -> ``Conv2d``; ``Input0`` -> ``Input0``."""
    return module.split("(", 1)[0].strip() or "Module"


def profile_name(path: str | os.PathLike) -> str:
    """Graph name for a profile: its folder (``.../resnet50/graph.txt`` -> ``resnet50``)."""
    p = Path(path)
    return p.parent.name if p.name == "graph.txt" and p.parent.name else p.name.removesuffix(".txt")


def load(path: str | os.PathLike) -> OpGraph:
    """Import a ``graph.txt`` profile, named after its folder."""
    try:
        text = Path(path).read_text()
    except FileNotFoundError:
        raise ModelImportError(f"PipeDream profile {str(path)!r}: no such file") from None
    except (OSError, UnicodeDecodeError) as e:
        raise ModelImportError(f"PipeDream profile {str(path)!r}: cannot read ({e})") from None
    return graph_from_text(text, profile_name(path), f"PipeDream profile {str(path)!r}")


def load_bytes(raw: bytes, name: str) -> OpGraph:
    """The format registry's loader (`placer.importers.register_format`)."""
    try:
        text = raw.decode()
    except UnicodeDecodeError:
        raise ModelImportError("PipeDream profile: not UTF-8 text") from None
    return graph_from_text(text, name)
