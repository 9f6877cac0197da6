"""`bench/fidelity_stats.py`: the measurements' agreement with themselves."""

import pytest

from bench import fidelity_stats


def test_the_p10_ceiling_is_computed_from_the_stored_times():
    """README's "Spearman vs p10 (self)" comes from the results file: the split-half Spearman of the 10th
    percentiles, as ``split_half_spearman`` is of the medians (it was computed by hand, once)."""
    # two rounds of one step each (per_round 1): even rounds hold rows' first times, odd rounds their second
    rows = [{"times": [a, b], "assignment": [i], "measured": (a + b) / 2} for i, (a, b) in
            enumerate([(1.0, 1.1), (2.0, 2.2), (3.0, 3.3)])]
    noise = fidelity_stats.measurement_noise({"rows": rows, "per_round": 1})
    assert noise["split_half_spearman_p10"] == pytest.approx(1.0)
    rows[0]["times"], rows[2]["times"] = [1.0, 3.3], [3.0, 1.1]  # the halves now disagree on rows 0 and 2
    assert fidelity_stats.measurement_noise({"rows": rows, "per_round": 1})["split_half_spearman_p10"] < 0
