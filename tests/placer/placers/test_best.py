"""`placer.placers.best`: the one rule that picks the best heuristic placement."""

import math

import numpy as np
import pytest

from placer import presets
from placer.errors import PlacerError
from placer.placers import best, registry
from placer.synthetic import layered_graph


def test_fitting_beats_oom_then_the_lower_cost_then_the_first_named():
    costs = [3.0, 1.0, None, 2.0, 2.0, math.nan]
    ooms = [False, True, False, False, False, False]
    assert best.rank(costs, ooms) == [3, 4, 0, 2, 5, 1]


def test_every_heuristic_and_single_device_is_ranked_with_the_simulators_step_time():
    graph, cluster = layered_graph(40, seed=1), presets.get("2gpu")
    ranked = best.ranked_heuristics(graph, cluster)
    names = [c.name for c in ranked]
    assert set(names) >= set(best.single_devices(cluster))
    assert [(c.oom, c.cost) for c in ranked] == sorted((c.oom, c.cost) for c in ranked)
    top = ranked[0]
    if not top.name.startswith(best.SINGLE_DEVICE):
        assert registry.place(top.name, graph, cluster).step_time == top.cost


def test_a_score_ranks_the_candidates_instead():
    """Here the fewest ops off device 0 scores best; among equals, candidates stay in the order named."""
    graph, cluster = layered_graph(30, seed=2), presets.get("2gpu")
    names = ["single", *best.single_devices(cluster)]
    ranked = best.ranked_heuristics(graph, cluster, names,
                                    score=lambda a: (np.sum(a != 0, axis=1).astype(float), np.zeros(len(a), bool)))
    assert ranked[0].name == best.single_devices(cluster)[0] and ranked[-1].name == best.single_devices(cluster)[-1]
    assert all(c.cost == float(np.sum(c.assignment != 0)) for c in ranked)


def test_place_best_answers_the_fastest_candidate_that_fits_as_best_name():
    graph, cluster = layered_graph(40, seed=1), presets.get("4gpu")
    placement, step_times = best.place_best(graph, cluster)
    assert list(step_times) == best.candidates("step_time")
    assert placement.label == f"best:{placement.method}"
    assert placement.step_time == min(t for t in step_times.values() if t is not None)
    assert placement.meta["best_of"] == list(step_times)


@pytest.mark.parametrize("objective", ["step_time", "throughput"])
def test_every_heuristic_competes_on_every_objective(objective):
    """One rule for `place`, `compare`, `best` and the service: pipeline_dp, built for throughput, is a step
    time candidate like the rest (it wins some graphs there), and the step time placers compete on max load."""
    assert best.candidates(objective) == registry.names(heuristic_only=True)
    assert "pipeline_dp" in best.candidates(objective)


def test_a_placement_built_for_another_objective_says_so():
    note = best.built_for_note("pipeline_dp", "step_time")
    assert "pipeline_dp builds its placement for throughput" in note and "candidate of best" in note
    assert "builds its placement for step_time" in best.built_for_note("best:heft", "throughput")


def test_place_best_takes_known_placements_as_they_are():
    """A candidate already placed (``placer compare --methods all,best``) is not placed again."""
    graph, cluster = layered_graph(40, seed=1), presets.get("2gpu")
    known = registry.place("single", graph, cluster)
    placement, step_times = best.place_best(graph, cluster, names=["single", "heft"],
                                            known={"single": known})
    assert step_times["single"] == known.step_time
    assert placement is not known and (placement.method != "single" or placement.devices == known.devices)


def test_candidates_refuse_learned_and_empty_lists():
    import placer.rl  # noqa: F401  (registers rl)

    with pytest.raises(PlacerError, match="candidates must be heuristics; 'rl' is learned"):
        best.candidates("step_time", ["heft", "rl"])
    with pytest.raises(PlacerError, match="candidates is empty"):
        best.candidates("step_time", [])
    with pytest.raises(PlacerError, match="unknown method 'nope'"):
        best.candidates("step_time", ["nope"])


def test_a_time_share_caps_the_slow_heuristics_and_leaves_the_others():
    """With no seconds to share, each capped heuristic answers what its own zero cap gives (the quick rule),
    and the linear ones what they always give."""
    graph, cluster = layered_graph(60, seed=3), presets.get("4gpu")
    ranked = {c.name.split("[capped")[0]: c for c in best.ranked_heuristics(graph, cluster, seconds=0.0)}
    capped = [n for n in registry.names(heuristic_only=True) if "time_limit" in registry.get(n).options]
    assert {"heft", "cpop", "m_etf", "m_sct", "pipeline_dp"} <= set(capped)
    for name in registry.names(heuristic_only=True):
        expected = registry.place(name, graph, cluster, **({"time_limit": 0.0} if name in capped else {}))
        assert np.array_equal(ranked[name].assignment, expected.assignment(graph, cluster)), name
    uncapped = {c.name: c for c in best.ranked_heuristics(graph, cluster)}
    assert any(not np.array_equal(uncapped[n].assignment, ranked[n].assignment) for n in ("heft", "m_etf"))


def test_a_heuristic_its_share_stopped_early_is_named_so():
    """A capped run places otherwise than `place --method NAME`: a training run's starts must not read as it."""
    graph, cluster = layered_graph(3000, seed=1), presets.get("4gpu")
    [capped] = best.ranked_heuristics(graph, cluster, ["heft"], seconds=1e-9)
    assert capped.name in (best.capped_name("heft", 1e-9), best.capped_name("heft", 0.0))  # what was left of it
    assert best.capped_name("heft", 1.5) == "heft[capped 1.5 s]"
    [own] = best.ranked_heuristics(graph, cluster, ["heft"])
    assert own.name == "heft"
