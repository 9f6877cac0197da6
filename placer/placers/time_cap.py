"""The placers' time cap: past it, the list schedulers place the ops left by a quick rule, searches stop.

A list scheduler places one op at a time, and its cost per op grows with the
graph (ready sets, idle gaps, link bookings), so a 100k-op graph can take
minutes. Each of these placers takes a ``time_limit`` option (`TIME_LIMIT`,
default `TIME_LIMIT_SECONDS`), counted from the placer's start; once it has
passed, the scheduler stops and `place_rest` places every op it has not placed
yet by the quick rule, so the answer is always a whole, valid placement. The
placement's ``meta`` then holds ``time_capped: true``, ``capped_ops`` (how many
ops the quick rule placed) and ``time_limit``; the scheduler's own makespan
(``schedule_length``) is left out, since the quick rule schedules nothing.

The quick rule, in topological order: an op whose colocation unit is pinned
goes to that device; otherwise to the device of its first input (graph order)
that is among the scheduler's devices and has room for it (`LiveMemory`), so
that chains stay together and add no transfers; otherwise (no input there, or
no room) to the scheduler's device with the most room. It is linear in the
ops and edges left. Below the cap the placers are deterministic; a capped
answer depends on how fast the machine is.

`pipeline_dp`'s local search takes the same ``time_limit`` option as a
safety cap over its work bounds (moves and kicks, `placer.placers.load_search`):
past it the search stops and keeps its best placement so far, and ``meta``
holds ``time_capped: true`` and ``time_limit`` (no ``capped_ops``: every op
was placed by the placer's own rule).
"""

from __future__ import annotations

import time
from typing import Annotated

import numpy as np

from placer.placers.common import LiveMemory, Problem
from placer.placers.options import Option

TIME_LIMIT_SECONDS = 60.0
"""Default cap: the scale issue's target for a heuristic at 100k ops (#43)."""

TIME_LIMIT_OPTION = "time_limit"
"""The option's name, as a capped placer's signature spells it."""

TIME_LIMIT = Option("seconds the placer may take; past it, the ops it has left are placed by a quick rule "
                    "(follow the first input's device) and meta time_capped says so", ge=0)

TimeLimit = Annotated[float, TIME_LIMIT]
"""The ``time_limit`` option's type, as every capped placer declares it."""


class Deadline:
    """When a placer's time is up: `seconds` from now (from `start`, a `time.perf_counter` value, if given)."""

    def __init__(self, seconds: float = TIME_LIMIT_SECONDS, start: float | None = None):
        self.seconds = float(seconds)
        self.end = (time.perf_counter() if start is None else start) + self.seconds
        self.hit = False
        """Whether `passed` has answered True: the cap cut someone's work."""

    def passed(self) -> bool:
        if time.perf_counter() >= self.end:
            self.hit = True
        return self.hit

    def left(self) -> float:
        """Seconds left, at least 0."""
        return max(0.0, self.end - time.perf_counter())


def place_rest(problem: Problem, memory: LiveMemory, assignment: np.ndarray, pinned: np.ndarray,
               devices: np.ndarray) -> int:
    """Place every op with ``assignment < 0`` by the quick rule (module docstring); how many it placed.

    `assignment` (per op) and `pinned` (device per unit, -1: none) are the
    scheduler's own and are filled in place; `memory` is charged as the
    scheduler charges it.
    """
    rest = np.flatnonzero(assignment < 0)
    rest = rest[np.argsort(problem.graph.topo_rank[rest], kind="stable")]
    devs = np.asarray(devices, dtype=np.int64)
    offered = set(devs.tolist())
    p_off, p_idx = problem.graph.predecessors
    p_off_l, p_idx_l = p_off.tolist(), p_idx.tolist()
    unit = problem.unit
    for i in rest.tolist():
        u = int(unit[i])
        new_unit = None
        d = int(pinned[u])
        if d < 0:
            room = memory.room()
            need = memory.need(i, u, pinned=False)
            for m in p_idx_l[p_off_l[i]:p_off_l[i + 1]]:
                q = int(assignment[m])
                if q in offered and room[q] >= need:
                    d = q
                    break
            else:
                d = int(devs[np.argmax(room[devs])])
            pinned[u] = d
            new_unit = u
        assignment[i] = d
        memory.place(i, d, new_unit, assignment)
    return len(rest)


def capped_meta(deadline: Deadline, capped_ops: int | None = None) -> dict:
    """What a capped placement's ``meta`` says; empty when the cap cut nothing.

    A list scheduler gives `capped_ops` (how many ops the quick rule placed);
    a search gives none, and was cut when its `deadline` was hit.
    """
    if not (deadline.hit if capped_ops is None else capped_ops):
        return {}
    meta = {"time_capped": True, "time_limit": deadline.seconds}
    if capped_ops is not None:
        meta["capped_ops"] = int(capped_ops)
    return meta
