"""The recorded placements stay identical (the quick part; `python -m tests.golden.placements --check` runs all)."""

import json

import pytest

from tests.golden.placements import CLUSTERS, GOLDEN, differences, heuristic_entries, zero_shot_entries

QUICK = ("rnnlm", "nmt")


@pytest.mark.parametrize("cluster", CLUSTERS)  # one test per cluster, so parallel workers share them
def test_heuristics_place_the_quick_graphs_as_recorded(cluster):
    expected = json.loads(GOLDEN.read_text())
    got = heuristic_entries(QUICK, progress=False, clusters=(cluster,))
    assert len(got) >= 2 * 10
    assert differences({k: v for k, v in expected.items() if k in got}, got) == []


def test_the_shipped_policy_places_the_quick_graphs_as_recorded():
    expected = json.loads(GOLDEN.read_text())
    got = zero_shot_entries(QUICK, progress=False)
    assert len(got) == 2 * len(CLUSTERS)
    assert differences({k: v for k, v in expected.items() if k in got}, got) == []
