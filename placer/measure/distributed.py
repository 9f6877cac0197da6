"""Scoring a training step's samples on Ray workers.

`RaySimulator` scores a trainer's samples (its ``scorer``): ``run_batch`` splits the
K sampled placements into one chunk per worker, each worker (a Ray actor
holding its own `Simulator` of the same graph and cluster) simulates its
chunk, and the results are joined in the original order. The simulation is
deterministic, so a run with Ray gives the same numbers as one without for the
same seed.

Given a `MeasuredSimulator` (``--reward measured --ray``), each worker builds
its own from the graph (which carries its GraphDef) and times its chunk in
TensorFlow on the devices of the machine it runs on: measurement, the slow
part, spreads over the Ray cluster (one worker per machine is what keeps the
timings clean; two on one machine share its cores). It scores and nothing
else: bounds, memory and the heuristics stay the trainer's own simulator's.
Ray is imported only here, so nothing starts Ray unless ``placer train --ray``
asks for it.

It wraps a `Simulator` or a `MeasuredSimulator` and knows nothing of the
learned placer, so it sits with measurement; the trainer is handed one by
``placer train``.
"""

from __future__ import annotations

import os

import numpy as np

from placer.errors import PlacerError
from placer.simulator.core import BatchResult, Simulator


class RaySimulator:
    """A trainer's scorer: a `Simulator`'s ``run_batch``, run on `workers` Ray actors.

    Parameters
    ----------
    sim : the local simulator (its graph and cluster are sent to the workers once).
    address : ``"auto"`` (a running cluster, else a new local instance) or a Ray address.
    workers : Ray actors to spread each batch over.

    `sim` may be a `MeasuredSimulator`: the workers then measure their chunks.
    """

    def __init__(self, sim: Simulator, address: str = "auto", workers: int = 2, **init_options):
        # Ray reports usage statistics to its makers unless told not to; placer sends nothing off the
        # machines it is asked to use (a user's own setting wins)
        os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
        try:
            import ray
        except ImportError:
            raise PlacerError("--ray needs the ray package (pip install ray==2.60.0)") from None
        if workers < 1:
            raise PlacerError(f"Ray workers must be at least 1, got {workers}")
        from placer.measure.reward import MeasuredSimulator

        measure = {"warmup": sim.warmup, "runs": sim.runs} if isinstance(sim, MeasuredSimulator) else None
        if not ray.is_initialized():
            try:
                if address == "auto":
                    try:
                        ray.init(address="auto", include_dashboard=False, log_to_driver=False, **init_options)
                    except ConnectionError:
                        ray.init(include_dashboard=False, log_to_driver=False, **init_options)
                else:
                    ray.init(address=address, include_dashboard=False, log_to_driver=False, **init_options)
            except (ConnectionError, ValueError, RuntimeError) as e:
                raise PlacerError(f"cannot reach Ray at {address!r}: {str(e).splitlines()[0]}") from None

        @ray.remote(num_cpus=1)
        class _Worker:
            def __init__(self, graph_dict, cluster_dict, measure):
                import os

                os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
                from placer.cluster import Cluster
                from placer.graph import OpGraph

                self.sim = Simulator(OpGraph.from_dict(graph_dict), Cluster.from_dict(cluster_dict))
                if measure is not None:
                    from placer.measure.reward import MeasuredSimulator

                    self.sim = MeasuredSimulator(self.sim, **measure)

            def run_batch(self, assignments):
                r = self.sim.run_batch(assignments)
                return r.step_time, r.busy, r.peak_memory, r.bytes_moved, r.oom

        graph_ref = ray.put(sim.graph.to_dict())
        cluster_ref = ray.put(sim.cluster.to_dict())
        self._ray = ray
        self._workers = [_Worker.remote(graph_ref, cluster_ref, measure) for _ in range(workers)]

    def run_batch(self, assignments: np.ndarray) -> BatchResult:
        """Simulate K placements (``[K, num_ops]``) on the workers; rows in the input's order."""
        places = np.atleast_2d(np.asarray(assignments, dtype=np.int64))
        chunks = [c for c in np.array_split(places, min(len(self._workers), len(places))) if len(c)]
        parts = self._ray.get([w.run_batch.remote(c) for w, c in zip(self._workers, chunks)])
        step, busy, peak, moved, oom = (np.concatenate([p[k] for p in parts]) for k in range(5))
        return BatchResult(step, busy, peak, moved, oom)

    def shutdown(self) -> None:
        for w in self._workers:
            self._ray.kill(w)
        self._workers = []
