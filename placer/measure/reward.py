"""Measured rewards: a trainer's samples timed in TensorFlow instead of simulated.

`MeasuredSimulator` scores a trainer's samples (its ``scorer``, ``placer train
--reward measured``, the paper's setting): ``run_batch`` runs each sampled
placement for real (`PlacedStep` on the cluster's logical CPU devices or
GPUs) and reports the median of a few steps as its step time. Memory and
out-of-memory still come from the simulator (a real OOM would end the run).
Slow: each sample builds and runs a TF session.
"""

from __future__ import annotations

import numpy as np

from placer.errors import PlacerError
from placer.placement import Placement
from placer.simulator.core import BatchResult, Simulator


class MeasuredSimulator:
    """A trainer's scorer: a `Simulator`'s ``run_batch`` with step times measured in TensorFlow.

    Parameters
    ----------
    sim : the local simulator of a graph with a TensorFlow origin.
    warmup, runs : untimed and timed steps per sample.

    Raises
    ------
    NoTensorFlowOrigin
        If the graph carries no GraphDef.
    PlacerError
        If the cluster's devices are not all CPUs (logical devices of this machine) or GPUs.
    """

    def __init__(self, sim: Simulator, warmup: int = 1, runs: int = 3):
        from placer.measure.pinning import canonical_device
        from placer.measure.source import graphdef_of

        self._local = sim
        self.graph_def = graphdef_of(sim.graph)
        names = [canonical_device(d) for d in sim.cluster.device_names]
        self.num_cpus = max(1, sum(1 for n in names if ":CPU:" in n))
        self.warmup, self.runs = warmup, runs
        if warmup < 0 or runs < 1:
            raise PlacerError(f"need warmup >= 0 and runs >= 1, got {warmup} and {runs}")

    @property
    def graph(self):
        """The graph placed (the simulator's)."""
        return self._local.graph

    @property
    def cluster(self):
        """The cluster placed on (the simulator's)."""
        return self._local.cluster

    def measure(self, assignment: np.ndarray) -> float:
        """Median real step time of one placement (device index per op)."""
        from placer.measure.runner import PlacedStep

        placement = Placement.from_assignment(self._local.graph, self._local.cluster, assignment, "sample")
        with PlacedStep(self._local.graph, self.graph_def, placement, self.num_cpus) as step:
            return float(np.median(step.time(self.warmup, self.runs)))

    def run_batch(self, assignments: np.ndarray) -> BatchResult:
        places = np.atleast_2d(np.asarray(assignments, dtype=np.int64))
        res = self._local.run_batch(places)
        res.step_time = np.array([self.measure(a) for a in places])
        return res
