"""The error tree: every error a user can cause derives from `PlacerError`.

The CLI prints a `PlacerError` as one line and exits non-zero; the service
answers it with a 4xx. Anything else escaping is a bug.
"""


class PlacerError(Exception):
    """Base of every error caused by bad input or an impossible request."""


class GraphError(PlacerError):
    """A graph is malformed: cycle, dangling input, duplicate name, bad size..."""


class ClusterError(PlacerError):
    """A cluster spec is malformed or names an unknown preset."""


class PlacementError(PlacerError):
    """A placement does not fit its graph or cluster (unknown op or device...)."""


class ModelImportError(PlacerError):
    """A model file could not be imported (corrupt protobuf, unknown format...)."""
