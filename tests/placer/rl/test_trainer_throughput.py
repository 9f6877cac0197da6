"""REINFORCE on the throughput objective: rewards from the max device load, warm start and best follow it."""

import numpy as np
import pytest

from placer.errors import PlacerError
from placer.objectives import ThroughputModel
from placer.rl.trainer import TrainConfig, Trainer, train


def _config(**kw):
    base = dict(samples=16, groups=16, hidden=16, learning_rate=3e-3, warm_start="none", seed=3, jit=False,
                objective="throughput")
    base.update(kw)
    return TrainConfig(**base)


def test_scores_are_max_loads(chains, pair):
    trainer = Trainer(chains, pair, _config())
    actions, _ = trainer.sample(0)
    cost, oom, reward = trainer.score(actions)
    model = ThroughputModel(chains, pair)
    assert cost == pytest.approx(model.max_load_batch(trainer.grouping.expand(actions)))
    assert not oom.any()
    assert reward == pytest.approx(-np.sqrt(cost / model.lower_bound()))


def test_cold_start_finds_one_chain_per_device(chains, pair):
    """Max load 5 (one 5-op chain per device, nothing crosses) is the lower bound."""
    trainer = Trainer(chains, pair, _config())
    train(trainer, max_steps=60)
    best = trainer.best_placement()
    assert best.objective == "throughput" and best.max_load == pytest.approx(5.0)
    assert best.step_time == pytest.approx(5.0)


def test_warm_start_picks_by_max_load(chains, pair):
    trainer = Trainer(chains, pair, _config(warm_start="heuristic"))
    name, _, cost = trainer.reference
    assert cost == pytest.approx(5.0)  # a throughput placer (pipeline_dp) or a heuristic reaching the bound
    info = trainer.warm_start()
    assert info["heuristic"] == name


def test_unknown_objective_is_refused():
    with pytest.raises(PlacerError, match="objective must be one of step_time, throughput"):
        TrainConfig(objective="latency").check()
