"""The error tree: every error a user can cause derives from `PlacerError`.

The CLI prints a `PlacerError` as one line and exits non-zero; the service
answers it with a 4xx. Anything else escaping is a bug. Ctrl-C is a
KeyboardInterrupt (`interrupted`); `uninterruptible` marks code it must not cut in two.
"""

import contextlib


class PlacerError(Exception):
    """Base of every error caused by bad input or an impossible request."""


class GraphError(PlacerError):
    """A graph is malformed: cycle, dangling input, duplicate name, bad size..."""


class ClusterError(PlacerError):
    """A cluster spec is malformed or names an unknown preset."""


class GroupingError(PlacerError):
    """A graph cannot be coarsened into as few groups as asked within the memory cap of a group."""


class PlacementError(PlacerError):
    """A placement does not fit its graph or cluster (unknown op or device...)."""


class ModelImportError(PlacerError):
    """A model file could not be imported (corrupt protobuf, unknown format...)."""


class InputShapeError(ModelImportError):
    """A placeholder's shape is not known and was not given. The message says how to give it; `problem`,
    when set, says the rest (which placeholder, what is missing), for a caller that words its own hint."""

    def __init__(self, message: str, problem: str | None = None):
        super().__init__(message)
        self.problem = problem


def interrupted(error: BaseException) -> bool:
    """Whether `error` is a Ctrl-C (KeyboardInterrupt) or was caused by one.

    A KeyboardInterrupt raised while numba-compiled code runs (the simulator)
    comes back as a SystemError whose cause is the KeyboardInterrupt: it must
    stop a run as Ctrl-C does, not read as the method failing.
    """
    seen: set[int] = set()
    e: BaseException | None = error
    while e is not None and id(e) not in seen:
        if isinstance(e, KeyboardInterrupt):
            return True
        seen.add(id(e))
        e = e.__cause__ or e.__context__
    return False


_uninterruptible = 0
"""How many `uninterruptible` blocks are running (in the main thread, where signal handlers run)."""


@contextlib.contextmanager
def uninterruptible():
    """A block that an interrupt must not cut in two, such as a training step changing the weights and counting
    the step: a checkpoint saved on the way out would hold the weights of one step and the count of another.

    While in it, `placer.cli.common.StopOnSignal` takes a second Ctrl-C or SIGTERM as it takes the first
    (the run stops after the block, and saves) instead of raising KeyboardInterrupt at once. Keep such
    blocks short: the long part of a step (sampling, simulating) stays outside, where a second Ctrl-C still
    stops at once.
    """
    global _uninterruptible
    _uninterruptible += 1
    try:
        yield
    finally:
        _uninterruptible -= 1


def in_uninterruptible() -> bool:
    """Whether an `uninterruptible` block is running."""
    return _uninterruptible > 0
