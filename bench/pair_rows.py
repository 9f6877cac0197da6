"""What the per-pair benchmarks of the zero-shot answer share: placing a pair, and a results file that resumes.

`bench.bench_refine_starts` and `bench.bench_worst_frontier` each place every heuristic and the shipped
policy's zero-shot answer on a graph and cluster, then search from them; and each keeps its rows in one JSON
file with the settings they were made with, so the same command again goes on where it stopped.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import NamedTuple

from placer.cluster import Cluster
from placer.fileio import write_atomic
from placer.graph import OpGraph
from placer.placement import Placement
from placer.placers import registry


class PlacedPair(NamedTuple):
    """Every heuristic's placement and the zero-shot answer of one graph and cluster."""

    placed: dict[str, Placement]
    fits: dict[str, float]
    """Step time of each heuristic placement that fits in memory."""
    best: str
    """The fastest of those."""
    zero_shot: Placement
    zero_shot_seconds: float


def place_pair(graph: OpGraph, cluster: Cluster) -> PlacedPair:
    """Every registered heuristic's placement, then the shipped policy's zero-shot answer (steered, the default)."""
    import placer.rl  # noqa: F401 - registers method "rl"

    placed = {m: registry.place(m, graph, cluster) for m in registry.names(heuristic_only=True)}
    fits = {m: p.step_time for m, p in placed.items() if not p.oom}
    t0 = time.perf_counter()
    zero_shot = registry.place("rl", graph, cluster, policy="shipped")
    return PlacedPair(placed, fits, min(fits, key=fits.get), zero_shot, time.perf_counter() - t0)


def stored_rows(out: Path, settings: dict) -> list[dict]:
    """The rows `out` holds if they were made with `settings` (none otherwise: they are made again)."""
    stored = json.loads(out.read_text()) if out.exists() else {}
    return list(stored.get("rows", [])) if stored.get("settings") == settings else []


def save_rows(out: Path, settings: dict, rows: list[dict]) -> None:
    """Write `rows` and their `settings` to `out` atomically (after each pair: an interrupted run keeps them)."""
    write_atomic(out, (json.dumps({"settings": settings, "rows": rows}, indent=1) + "\n").encode())
