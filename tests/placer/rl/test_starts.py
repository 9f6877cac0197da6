"""A run never answers worse than the starts it was given (the best heuristic, the zero-shot answer), says
which it kept, bounds its imitation by the budget, and keeps its entropy from collapsing."""

from dataclasses import replace

import numpy as np
import pytest

from placer.rl.finetune import fine_tuner
from placer.rl.starts import TRAINED, ZERO_SHOT, heuristic_source
from placer.rl.trainer import TrainConfig, Trainer, train
from tests.placer.rl.test_finetune import _policy

SPLIT = np.array([0] * 5 + [1] * 5)
"""One chain per device of `two_chains`: 5 s, the optimum."""


def _config(**kw):
    return TrainConfig(**{**dict(samples=4, groups=16, hidden=16, warm_start="none", seed=3, jit=False), **kw})


def test_a_tiny_budget_still_returns_the_best_heuristic(chains, pair):
    """One REINFORCE step from a random policy rarely finds the optimum; the heuristic given is answered."""
    trainer = Trainer(chains, pair, _config(), reference=("split", SPLIT, 5.0))
    assert train(trainer, max_steps=1) == "done"
    assert trainer.state.trained.step_time > 5.0  # what training sampled is slower
    placed = trainer.best_placement()
    assert placed.step_time == pytest.approx(5.0) and np.array_equal(placed.assignment(chains, pair), SPLIT)
    kept = placed.meta["kept"]
    assert kept["kept"] == heuristic_source("split") and kept["heuristic"] == "split"
    assert kept["step_times"] == {"zero_shot": None, "heuristic": 5.0, "trained": trainer.state.trained.step_time}
    assert "no slower than" in kept["why"]


def test_training_that_beats_its_starts_is_kept(chains, pair):
    slow = np.zeros(10, dtype=np.int64)  # everything on one device: 10 s
    trainer = Trainer(chains, pair, _config(samples=16), reference=("one_device", slow, 10.0))
    train(trainer, max_steps=3)
    placed = trainer.best_placement()
    assert placed.step_time < 10.0 and placed.meta["kept"]["kept"] == TRAINED
    assert placed.meta["kept"]["step_times"]["trained"] == pytest.approx(placed.step_time)


def test_a_fine_tune_never_answers_worse_than_the_heuristic_or_its_zero_shot_answer(chains, pair):
    """A random policy's greedy answer is slower than the optimum the heuristic gives: the heuristic is kept.
    Given a slow heuristic instead, the best of 64 samples is kept (no step has beaten it)."""
    policy = _policy(0)
    good = fine_tuner(chains, pair, policy, _config(), reference=("split", SPLIT, 5.0), samples=0)
    train(good, max_steps=1)
    answered = good.best_placement()
    assert answered.step_time == pytest.approx(5.0)
    assert answered.meta["kept"]["kept"] == heuristic_source("split")
    assert answered.meta["placed_by"] == "heuristic split"

    slow = ("one_device", np.zeros(10, dtype=np.int64), 10.0)
    tuned = fine_tuner(chains, pair, policy, _config(), reference=slow, samples=64)
    zero_shot = tuned.state.warm_start["start_step_time"]
    assert zero_shot < 10.0
    tuned.state.trained = replace(tuned.state.trained, step_time=zero_shot + 1.0)  # as after a slower step
    kept = tuned.best_placement().meta["kept"]
    assert kept["kept"] == ZERO_SHOT and kept["step_times"]["zero_shot"] == pytest.approx(zero_shot)
    assert tuned.best_placement().step_time == pytest.approx(zero_shot)


def test_the_floor_survives_a_checkpoint(chains, pair, tmp_path):
    from placer.rl import checkpoint

    trainer = Trainer(chains, pair, _config(), reference=("split", SPLIT, 5.0))
    train(trainer, max_steps=1)
    checkpoint.save(trainer, tmp_path)
    saved = checkpoint.load_state(tmp_path)
    again = Trainer(chains, pair, checkpoint.config_of(saved), reference=checkpoint.reference_of(saved))
    checkpoint.restore(again, tmp_path, saved)
    assert again.state.floor == trainer.state.floor and again.state.trained == trainer.state.trained
    assert again.best_placement().meta["kept"]["kept"] == heuristic_source("split")


def test_imitation_takes_at_most_its_share_of_the_budget_and_reports_progress(chains, pair):
    seen = []
    none = Trainer(chains, pair, _config(warm_start="heuristic", imitation_fraction=0.0),
                   reference=("split", SPLIT, 5.0))
    train(none, budget_seconds=1e-3, on_imitation=lambda *a: seen.append(a))
    assert none.state.warm_start["imitation_steps"] == 0 and seen == [] and none.state.step == 1
    some = Trainer(chains, pair, _config(warm_start="heuristic", imitation_fraction=1.0),
                   reference=("split", SPLIT, 5.0))
    train(some, budget_seconds=600.0, max_steps=1, on_imitation=lambda *a: seen.append(a))
    steps = some.state.warm_start["imitation_steps"]
    assert steps >= 1 and [s for s, *_ in seen] == list(range(1, steps + 1))
    assert all(limit == 600.0 and 0 < p <= 1 for _, p, _, limit in seen)


def test_the_entropy_bonus_grows_while_the_entropy_is_under_its_floor(chains, pair):
    """With the floor at a uniform choice's entropy (never reached), the weight doubles every step; history.csv
    has it beside the entropy."""
    from placer.rl.trainer import StepStats

    rows = []
    train(Trainer(chains, pair, _config(entropy_floor=1.0), reference=("split", SPLIT, 5.0)), max_steps=3,
          on_step=rows.append)
    weights = [r.entropy_weight for r in rows]
    assert weights == [0.01, 0.02, 0.04] and all(0 < r.entropy < np.log(2) for r in rows)
    assert {"entropy", "entropy_weight"} <= set(StepStats.FIELDS)
    rows = []
    train(Trainer(chains, pair, _config(entropy_floor=0.0), reference=("split", SPLIT, 5.0)), max_steps=2,
          on_step=rows.append)
    assert [r.entropy_weight for r in rows] == [0.01, 0.01]


def test_the_heuristics_take_at_most_their_share_of_the_budget():
    """`heuristic_limit_of` gives half the budget; a trainer given no time for them starts from what the
    capped heuristics answer in no time (`placer.placers.best.ranked_heuristics` with ``seconds=0``)."""
    from placer import presets
    from placer.placers import best
    from placer.rl.starts import HEURISTIC_SHARE, heuristic_limit_of
    from placer.synthetic import layered_graph

    assert heuristic_limit_of(None) is None and heuristic_limit_of(60) == HEURISTIC_SHARE * 60 == 30.0
    graph, cluster = layered_graph(60, seed=5), presets.get("4gpu")
    top = best.ranked_heuristics(graph, cluster, seconds=0.0)[0]
    assert best.ranked_heuristics(graph, cluster)[0].name != top.name  # with time, another heuristic wins here
    trainer = Trainer(graph, cluster, _config(), heuristic_limit=0.0)
    assert trainer.reference[0] == top.name and np.array_equal(trainer.reference[1], top.assignment)
