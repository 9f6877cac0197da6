"""Measurement: run placed TensorFlow graphs for real, profile op times, export placements,
and spread the scoring of sampled placements over Ray workers (`distributed`).

TensorFlow is imported inside the functions, so importing this package is cheap.
"""

from placer.measure.source import NoTensorFlowOrigin, attach_graphdef, graphdef_of

__all__ = ["NoTensorFlowOrigin", "attach_graphdef", "graphdef_of"]
