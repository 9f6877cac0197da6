"""Racing heuristic warm starts by successive halving: the schedule, the starts, the race, its resume."""

import pytest

from placer import presets
from placer.errors import PlacerError
from placer.rl.race import Race, halving_schedule, load_race_state, race_or_trainer, race_starts, restore_race
from placer.rl.trainer import TrainConfig, Trainer, ranked_heuristics
from placer.synthetic import layered_graph


def _config(**kw):
    base = dict(samples=8, groups=12, hidden=16, seed=1, jit=False, imitation_steps=20)
    base.update(kw)
    return TrainConfig(**base)


@pytest.fixture(scope="module")
def graph():
    return layered_graph(40, seed=1)


@pytest.fixture(scope="module")
def cluster():
    return presets.get("4gpu")


@pytest.mark.parametrize("starts, total, rounds", [
    (2, 10.0, [(2, 2.5), (1, 7.5)]),
    (3, 300.0, [(3, 50.0), (1, 200.0)]),
    (4, 600.0, [(4, 50.0), (2, 150.0), (1, 350.0)]),
    (8, 80.0, [(8, 2.5), (4, 7.5), (2, 17.5), (1, 37.5)]),
])
def test_each_round_gets_an_equal_share_split_among_the_starts_left(starts, total, rounds):
    got = halving_schedule(starts, total)
    assert [n for n, _ in got] == [n for n, _ in rounds]
    assert [cum for _, cum in got] == pytest.approx([cum for _, cum in rounds])
    spent = sum(n * (cum - (rounds[i - 1][1] if i else 0.0)) for i, (n, cum) in enumerate(rounds))
    assert spent == pytest.approx(total)


def test_the_starts_are_the_fastest_distinct_heuristics(graph, cluster):
    ranked = ranked_heuristics(graph, cluster)
    assert [c[2] for c in ranked] == sorted(c[2] for c in ranked) and not ranked[0][3]
    starts = race_starts(graph, cluster, 3, _config())
    assert len(starts) == 3 and starts[0][0] == ranked[0][0]
    assert [s[2] for s in starts] == sorted(s[2] for s in starts) and len({s[2] for s in starts}) == 3
    raw = {name: cost for name, _, cost in starts}
    for name, _, cost in race_starts(graph, cluster, 3, _config(warm_start_search=0.5)):
        assert name.endswith("+search") and cost <= raw[name.removesuffix("+search")] + 1e-12


def test_the_race_drops_the_slower_starts_and_keeps_the_fastest_placement(graph, cluster):
    race = Race(graph, cluster, _config(), race_starts(graph, cluster, 3, _config()))
    rows = []
    assert race.run(max_steps=30, on_step=rows.append) == "done"
    s = race.state
    assert s.step == 30 and s.samples == 30 * 8 and [r.step for r in rows] == list(range(1, 31))
    assert [a.state.step for a in race.arms].count(20) == 1 and sorted(a.state.step for a in race.arms)[:2] == [5, 5]
    (winner,) = race.alive
    bests = [a.state.best.step_time for a in race.arms]
    assert race.arms[winner].state.step == 20 and s.best.step_time == min(bests)
    assert rows[-1].best_step_time == min(bests) and all(a.best_step_time >= b.best_step_time
                                                        for a, b in zip(rows, rows[1:]))
    summary = race.summary()["starts"]
    # the dropped starts were not faster than the winner when they were dropped (after 5 steps each)
    assert [r["dropped_after_round"] for r in summary].count(0) == 2 and summary[winner]["dropped_after_round"] is None
    placement = race.best_placement()
    assert placement.step_time == pytest.approx(min(bests)) and placement.meta["race"]["starts"] == summary
    assert placement.meta["warm_start"]["heuristic"] == summary[race.arms.index(race._leader())]["heuristic"]


def test_an_interrupted_race_resumes_to_the_same_result(graph, cluster, tmp_path):
    starts = race_starts(graph, cluster, 3, _config())
    whole = Race(graph, cluster, _config(), starts)
    whole.run(max_steps=24)

    race = Race(graph, cluster, _config(), starts)
    seen = []
    assert race.run(max_steps=24, on_step=seen.append, should_stop=lambda: len(seen) >= 7) == "interrupted"
    race.save(tmp_path)
    saved = load_race_state(tmp_path)
    assert saved["starts"] == 3 and saved["round"] == 0 and (tmp_path / "starts" / "2" / "trainer_state.json").exists()
    resumed = restore_race(graph, cluster, tmp_path, saved)
    assert resumed.state.step == 7
    assert resumed.run(max_steps=24) == "done"
    assert resumed.state.step == 24 and resumed.alive == whole.alive
    assert [a.state.best.step_time for a in resumed.arms] == pytest.approx([a.state.best.step_time for a in whole.arms])


def test_a_race_needs_heuristic_starts(graph, cluster):
    with pytest.raises(PlacerError, match="heuristic warm starts"):
        Race(graph, cluster, _config(warm_start="none"), race_starts(graph, cluster, 2, _config()))
    with pytest.raises(PlacerError, match="2 to 8 distinct starts"):
        Race(graph, cluster, _config(), race_starts(graph, cluster, 1, _config()))



def test_where_every_heuristic_places_alike_one_trainer_runs_and_finding_the_starts_counts(graph, cluster,
                                                                                         monkeypatch):
    import time

    from placer.rl import race as race_module

    def slow_starts(*args):  # finding the starts takes at least 0.2 s
        time.sleep(0.2)
        return race_starts(*args)

    monkeypatch.setattr(race_module, "race_starts", slow_starts)
    race = race_or_trainer(graph, cluster, _config(), 3)
    assert isinstance(race, Race) and len(race.arms) == 3 and race.heuristic_seconds >= 0.2
    alone = race_or_trainer(graph, presets.get("local:1"), _config(), 3)  # one device: one placement
    assert isinstance(alone, Trainer) and alone.reference[0].startswith("single_device:")
    assert alone.setup_seconds >= 0.2
