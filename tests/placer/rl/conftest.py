"""Small graphs with known best placements, for the learned placer's tests."""

import os

import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

from placer.graph import OpGraph  # noqa: E402
from tests.placer.helpers import op, two_device_cluster  # noqa: E402


def two_chains(length: int = 5, cost: float = 1.0, out: float = 4e9) -> OpGraph:
    """Two independent chains of `length` ops of `cost` s whose tensors take 4 s to cross the link.

    The best placement on two equal devices puts one whole chain on each:
    step time ``length * cost``, the lower bound; splitting a chain costs 4 s.
    """
    ops = []
    for c in "xy":
        for i in range(length):
            ops.append(op(f"{c}{i}", [f"{c}{i - 1}"] if i else [], cost=cost, out=out))
    return OpGraph("two_chains", ops)


@pytest.fixture
def chains() -> OpGraph:
    return two_chains()


@pytest.fixture
def pair():
    return two_device_cluster(bandwidth=1e9)
