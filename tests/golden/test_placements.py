"""The recorded placements stay identical (the quick part; `python -m tests.golden.placements --check` runs all)."""

import json

import pytest

from placer.placers import registry
from tests.golden.placements import CLUSTERS, GOLDEN, differences, heuristic_entries, zero_shot_entries

QUICK = ("rnnlm", "nmt")
HEURISTICS = set(registry.names(heuristic_only=True))


@pytest.mark.parametrize("cluster", CLUSTERS)  # one test per cluster, so parallel workers share them
def test_heuristics_place_the_quick_graphs_as_recorded(cluster):
    expected = json.loads(GOLDEN.read_text())
    got = heuristic_entries(QUICK, progress=False, clusters=(cluster,))
    recorded = {k: v for k, v in expected.items()
                if k.split("/")[0] in QUICK and k.split("/")[1] == cluster and k.split("/")[2] in HEURISTICS}
    assert len(recorded) == len(QUICK) * len(HEURISTICS)
    assert differences(recorded, got) == []


def test_the_shipped_policy_places_the_quick_graphs_as_recorded():
    expected = json.loads(GOLDEN.read_text())
    got = zero_shot_entries(QUICK, progress=False)
    assert len(got) == 2 * len(CLUSTERS)
    assert differences({k: v for k, v in expected.items() if k in got}, got) == []
