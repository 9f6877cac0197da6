"""placer: learned device placement for TensorFlow graphs.

The library's public surface: graphs (`OpGraph`), clusters (`Cluster`),
placements (`Placement`) and the step-time simulator (`simulate`).
Heavy dependencies (TensorFlow, numba) load only where they are used.
"""

__version__ = "0.1.0"

from placer.errors import PlacerError, GraphError, ClusterError, PlacementError  # noqa: F401
from placer.graph import Op, OpGraph  # noqa: F401
from placer.cluster import Cluster, Device, Link  # noqa: F401
from placer.placement import Placement  # noqa: F401
