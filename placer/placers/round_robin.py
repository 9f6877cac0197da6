"""`round_robin`: ops dealt over the GPUs in topological order.

The naive baseline: colocation units (see `placer.placers.common`) are dealt
one per device in turn, over the GPUs (over every device when the cluster
has none). A unit that would overflow its device's memory goes to the next
device in turn with room.
"""

from __future__ import annotations

import numpy as np

from placer.placers.common import MemoryLedger, Problem, expand_units, reject_options
from placer.placers.registry import register


@register("round_robin", description="ops dealt over the GPUs in turn, in topological order")
def place_round_robin(graph, cluster, **options):
    """Deal colocation units over the candidate devices in topological order, skipping full devices."""
    reject_options("round_robin", options)
    problem = Problem.build(graph, cluster)
    devices = problem.candidates
    ledger = MemoryLedger(problem)
    unit_device = np.empty(problem.num_units, dtype=np.int64)
    turn = 0
    for u in range(problem.num_units):
        for k in range(len(devices)):
            d = int(devices[(turn + k) % len(devices)])
            if ledger.fits(u, d):
                turn = turn + k + 1
                break
        else:
            d = int(ledger.choose(u, devices)[0])
            turn += 1
        ledger.charge(u, d)
        unit_device[u] = d
    return problem.placement(expand_units(problem, unit_device), "round_robin", ledger)
