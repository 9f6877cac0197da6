"""`round_robin`: ops dealt over the GPUs in topological order.

The naive baseline: colocation units (see `placer.placers.common`) are dealt
one per device in turn, over the GPUs (over every device when the cluster
has none); `fit_to_memory` then moves units off any device the simulator
finds over memory.
"""

from __future__ import annotations

import numpy as np

from placer.cluster import Cluster
from placer.graph import OpGraph
from placer.placement import Placement
from placer.placers.common import Problem, expand_units, fit_to_memory
from placer.placers.registry import register


@register("round_robin", description="ops dealt over the GPUs in turn, in topological order")
def place_round_robin(graph: OpGraph, cluster: Cluster) -> Placement:
    """Deal colocation units over the candidate devices in topological order, then fit memory."""
    problem = Problem.build(graph, cluster)
    devices = problem.candidates
    unit_device = devices[np.arange(problem.num_units) % len(devices)]
    unit_device, ledger = fit_to_memory(problem, unit_device, devices)
    return problem.placement(expand_units(problem, unit_device), "round_robin", ledger)
