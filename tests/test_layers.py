"""The package's layers: imports go downward only, no module imports itself round a cycle, and the core,
the simulator, grouping and the heuristic placers load neither TensorFlow nor the service.

Every module under ``placer/`` and ``service/`` is parsed with `ast`, imports inside functions and under
``if TYPE_CHECKING`` included (an import hidden in a function is still a dependency; hiding is how the
old cycles survived). Each module belongs to one layer of `LAYERS`, bottom first; a module may import
its own layer and those below it. Where a module sits, and why, is written beside its pattern.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from fnmatch import fnmatch
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("generic I/O", (
        "placer.errors",  # the error tree every layer raises
        "placer.fileio",
    )),
    ("DAG algorithms", ("placer.dag",)),
    ("graph", (
        "placer.graph",
        "placer.synthetic",  # generated graphs for tests and benchmarks: OpGraph only
    )),
    ("cluster/presets", (
        "placer.cluster",
        "placer.topology",  # a cluster's switches, shared links and routes
        "placer.machines",  # real machines as topology clusters, which presets name
        "placer.presets",
        "placer.cost_model",  # op times from a graph and a cluster's devices
        "placer.placement",  # the Placement contract: names ops of a graph and devices of a cluster
        "placer",  # the package: re-exports the graph, cluster and placement types
    )),
    ("importers", (
        # model files into OpGraphs; the MSR importer builds clusters and placements, so above those.
        # graph_io names a GraphDef or MSR file given as a graph file, so it sits with the importers.
        "placer.importers", "placer.importers.*",
        "placer.graph_io",
    )),
    ("simulator", (
        "placer.simulator", "placer.simulator.*",
        "placer.objectives",  # step time and pipelined max load of a placement, from the simulator
        "placer.trace",  # a simulated step as a timeline
        "placer.plots",  # charts of traces and comparisons
    )),
    ("grouping", ("placer.grouping",)),
    ("placers", ("placer.placers", "placer.placers.*")),
    ("rl", ("placer.rl", "placer.rl.*")),
    ("measure", ("placer.measure", "placer.measure.*")),
    ("cli", ("placer.cli", "placer.cli.*")),
    ("service", (
        "service", "service.*",
        # `placer serve` starts the service: its module sits among the commands (which placer.cli.main
        # loads by name), but it imports the service and belongs to the service's layer
        "placer.cli.serve",
    )),
]

CORE_LAYERS = ("generic I/O", "DAG algorithms", "graph", "cluster/presets", "importers", "simulator", "grouping",
               "placers")
"""Layers whose every module must import without TensorFlow or the service."""


def _module_names() -> dict[str, Path]:
    """Dotted name -> file, for every module of placer/ and service/ (a package by its ``__init__.py``)."""
    out = {}
    for top in ("placer", "service"):
        for path in sorted((ROOT / top).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join(parts)] = path
    return out


MODULES = _module_names()


def layer_of(module: str) -> int:
    """Index in `LAYERS` of `module`'s layer; the most specific pattern wins (``placer.cli.serve``)."""
    best = None
    for i, (_, patterns) in enumerate(LAYERS):
        for p in patterns:
            if fnmatch(module, p) and (best is None or len(p) > len(best[1])):
                best = (i, p)
    if best is None:
        raise AssertionError(f"module {module} is in no layer: add it to LAYERS in {__file__}")
    return best[0]


def _resolve(name: str) -> str | None:
    """The project module `name` loads (its longest known prefix), or None outside placer/ and service/."""
    parts = name.split(".")
    while parts:
        dotted = ".".join(parts)
        if dotted in MODULES:
            return dotted
        parts.pop()
    return None


def imports_of(module: str, path: Path | None = None) -> set[tuple[str, int]]:
    """(imported project module, line) for each import statement anywhere in `module`'s file.

    ``from pkg import name`` counts as importing ``pkg.name`` when that is a module, else ``pkg``.
    """
    path = path or MODULES[module]
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    out = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names]
        else:
            continue
        for t in targets:
            resolved = _resolve(t)
            if resolved is not None and resolved != module:
                out.add((resolved, node.lineno))
    return out


GRAPH = {m: imports_of(m) for m in MODULES}


def test_every_module_has_a_layer():
    for m in MODULES:
        layer_of(m)


def test_imports_go_downward_only():
    upward = [f"{m}:{line} imports {target} ({LAYERS[layer_of(m)][0]} -> {LAYERS[layer_of(target)][0]})"
              for m, edges in GRAPH.items() for target, line in sorted(edges)
              if layer_of(target) > layer_of(m)]
    assert not upward, "upward imports:\n" + "\n".join(upward)


def _cycles() -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted({t for t, _ in GRAPH[v]}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(GRAPH):
        if v not in index:
            visit(v)
    return found


def test_no_import_cycles():
    assert _cycles() == []


def test_the_walk_sees_imports_inside_functions_and_relative_ones(tmp_path):
    """An import hidden in a function is what the old cycles hid behind: the walk must see it."""
    (tmp_path / "m.py").write_text("from . import graph\n"
                                   "def f():\n"
                                   "    from placer.placers import registry\n"
                                   "    import placer.rl.method\n")
    assert imports_of("placer.m", tmp_path / "m.py") == {("placer.graph", 1), ("placer.placers.registry", 3),
                                                          ("placer.rl.method", 4)}


CORE_MODULES = sorted(m for m in MODULES if LAYERS[layer_of(m)][0] in CORE_LAYERS)


@pytest.mark.parametrize("forbidden", ["tensorflow", "service"])
def test_the_core_simulator_grouping_and_heuristics_load_neither_tensorflow_nor_the_service(forbidden):
    """Importing every module of those layers, in a fresh interpreter, leaves `forbidden` unloaded."""
    code = ("import importlib, sys\n"
            f"for m in {CORE_MODULES!r}:\n"
            "    importlib.import_module(m)\n"
            f"print(sorted(m for m in sys.modules if m == {forbidden!r} or m.startswith({forbidden + '.'!r})))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "[]"
