"""`single`: the whole graph on one device, the fastest one that fits.

The baseline of Mirhoseini et al. (2017), "single GPU". Every device is
tried with the simulator (one batch), so "fits" is the simulator's own
memory verdict, not an estimate.
"""

from __future__ import annotations

import numpy as np

from placer.cluster import Cluster
from placer.graph import OpGraph
from placer.placement import Placement
from placer.placers.common import Problem
from placer.placers.registry import register


@register("single", description="everything on the fastest device that fits in memory (simulated)")
def place_single(graph: OpGraph, cluster: Cluster) -> Placement:
    """Place every op on the device with the shortest simulated step time among those that fit.

    When no device can hold the whole graph, the fastest device is chosen
    and the simulator marks the placement ``oom``.
    """
    from placer.simulator import Simulator

    problem = Problem.build(graph, cluster)
    sim = Simulator(graph, cluster, times=problem.times)
    num_devices = len(cluster)
    every_device = np.repeat(np.arange(num_devices, dtype=np.int64)[:, None], len(graph), axis=1)
    result = sim.run_batch(every_device)
    by_speed = np.lexsort((np.arange(num_devices), result.step_time))
    fitting = [int(d) for d in by_speed if not result.oom[d]]
    best = fitting[0] if fitting else int(by_speed[0])
    return problem.placement(every_device[best], "single", fits=bool(fitting))
