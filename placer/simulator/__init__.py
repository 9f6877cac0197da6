"""The step-time simulator: `Simulator(graph, cluster).run(assignment)`."""

from placer.simulator.core import BatchResult, SimResult, Simulator, evaluate

__all__ = ["Simulator", "SimResult", "BatchResult", "evaluate"]
