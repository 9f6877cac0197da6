"""REINFORCE training: finds a known optimum, moves probability toward good samples."""

import numpy as np
import pytest

from placer.errors import PlacerError
from placer.rl.trainer import TrainConfig, Trainer, train


def _config(**kw):
    base = dict(samples=16, groups=16, hidden=16, learning_rate=3e-3, warm_start="none", seed=3, jit=False)
    base.update(kw)
    return TrainConfig(**base)


def test_cold_start_finds_the_two_chain_optimum(chains, pair):
    """One chain per device (step time 5 s, the lower bound) within 60 steps, from a random policy.

    Random placements average about 16 s; the policy's own samples must also improve, not only the best.
    """
    trainer = Trainer(chains, pair, _config())
    assert trainer.sim.lower_bound == pytest.approx(5.0)
    rows = []
    reason = train(trainer, max_steps=60, on_step=rows.append)
    assert reason == "done" and trainer.state.step == 60 and trainer.state.samples == 60 * 16
    assert sum(r.mean_step_time for r in rows[-5:]) / 5 < 0.6 * sum(r.mean_step_time for r in rows[:5]) / 5
    best = trainer.best_placement()
    assert best.step_time == pytest.approx(5.0) and not best.oom
    x = {best.devices[f"x{i}"] for i in range(5)}
    y = {best.devices[f"y{i}"] for i in range(5)}
    assert len(x) == 1 and len(y) == 1 and x != y
    assert best.method == "rl" and best.meta["steps"] == 60 and best.meta["warm_start"] == {"method": "none"}


def test_reinforce_moves_probability_toward_better_than_baseline_samples(chains, pair):
    trainer = Trainer(chains, pair, _config(entropy_weight=0.0))
    actions, _ = trainer.sample(0)
    _, _, reward = trainer.score(actions)
    advantage = (reward - reward.mean()).astype(np.float32)
    assert advantage.max() > 0 > advantage.min()
    before = trainer.log_prob(actions)
    trainer.update(actions, advantage)
    change = trainer.log_prob(actions) - before
    assert change[advantage.argmax()] > 0 > change[advantage.argmin()]
    assert change[advantage > 0].mean() > 0 > change[advantage < 0].mean()


def test_warm_start_imitates_the_best_heuristic(chains, pair):
    trainer = Trainer(chains, pair, _config(warm_start="heuristic", imitation_steps=50))
    info = trainer.warm_start()
    assert info["method"] == "heuristic" and info["imitation_steps"] >= 1
    assert trainer.state.best.step_time <= info["projected_step_time"]
    assert trainer.state.best.step == 0


def test_warm_start_search_imitates_the_searched_heuristic():
    """warm_start_search: the heuristic is improved by local search first, never made slower, and imitated."""
    from placer import presets
    from placer.synthetic import layered_graph

    g, c = layered_graph(200, seed=4), presets.get("4gpu")
    plain = Trainer(g, c, _config(warm_start="heuristic")).reference
    searched = Trainer(g, c, _config(warm_start="heuristic", warm_start_search=5.0))
    name, devices, step_time = searched.reference
    assert name == plain[0] + "+search" and step_time <= plain[2]
    assert searched.sim.run(devices).step_time == pytest.approx(step_time)
    info = searched.warm_start()
    assert info["heuristic"] == name and info["projected_step_time"] <= plain[2] + 1e-12


def test_an_interrupted_warm_start_is_left_to_do_again(chains, pair):
    """Stopped by the caller (Ctrl-C, SIGTERM), the imitation is not recorded as done: a resume runs it."""
    trainer = Trainer(chains, pair, _config(warm_start="heuristic", imitation_steps=50))
    assert train(trainer, max_steps=5, should_stop=lambda: True) == "interrupted"
    assert trainer.state.warm_start == {} and trainer.state.step == 0
    assert train(trainer, max_steps=1) == "done"
    assert trainer.state.warm_start["method"] == "heuristic" and trainer.state.step == 1


def test_a_second_ctrl_c_during_the_imitation_keeps_the_learning_rate(chains, pair):
    """The imitation's raised learning rate stayed in the optimizer (and in the checkpoint saved on the way
    out) when a second Ctrl-C raised inside it: the resumed run trained at 5x the rate, 25x after another."""
    trainer = Trainer(chains, pair, _config(warm_start="heuristic", imitation_steps=50))
    calls = []

    def second_ctrl_c() -> bool:
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return False

    with pytest.raises(KeyboardInterrupt):
        trainer.warm_start(second_ctrl_c)
    assert float(trainer.optimizer.learning_rate.numpy()) == pytest.approx(trainer.config.learning_rate)


@pytest.mark.parametrize("field, value, message", [
    ("samples", 1, "at least 2"),
    ("groups", 0, "positive integer"),
    ("learning_rate", -1.0, "positive number"),
    ("warm_start", "magic", "warm_start must be one of"),
    ("baseline_decay", 1.0, "baseline_decay"),
    ("warm_start_search", -1.0, "non-negative number of seconds"),
    ("warm_start_search", float("nan"), "non-negative number of seconds"),
])
def test_bad_config_is_refused(field, value, message):
    with pytest.raises(PlacerError, match=message):
        TrainConfig(**{field: value}).check()


def test_warm_start_search_needs_a_heuristic_warm_start_of_step_time():
    for kw in ({"warm_start": "none"}, {"objective": "throughput"}):
        with pytest.raises(PlacerError, match="warm_start_search improves"):
            TrainConfig(warm_start_search=1.0, **kw).check()


def test_world_sigma_takes_half_the_reward_from_a_world_drawn_for_the_step(chains, pair):
    """Robust training: the reward mixes in one random world per step; step times (and the best) stay nominal."""
    from placer.rl.worlds import world_rewards, world_rng

    robust = Trainer(chains, pair, _config(world_sigma=0.5))
    r = robust.rollout()
    step_time, _, nominal = robust.score(r.actions)
    np.testing.assert_array_equal(r.step_time, step_time)
    drawn = world_rewards(chains, pair, robust.times, robust.grouping.expand(r.actions), robust.config.oom_penalty,
                          world_rng(robust.config.seed, 0), 0.5)
    assert not np.allclose(drawn, nominal)
    np.testing.assert_allclose(r.reward, 0.5 * (nominal + drawn))
    np.testing.assert_allclose(Trainer(chains, pair, _config(world_sigma=0.5)).rollout().reward, r.reward)


def test_train_needs_a_limit(chains, pair):
    with pytest.raises(PlacerError, match="budget"):
        train(Trainer(chains, pair, _config()))


def test_a_graph_whose_ops_cost_nothing_trains_without_nan():
    """Lower bound 0: the reward -sqrt(step_time / 0) was NaN, the weights became NaN after one step and the
    next sampled a device that does not exist (an internal TensorFlow error)."""
    from tests.placer.helpers import two_device_cluster
    from tests.placer.rl.conftest import two_chains

    trainer = Trainer(two_chains(cost=0.0, out=0.0), two_device_cluster(), _config())
    assert trainer.sim.lower_bound == 0.0
    rows = []
    assert train(trainer, max_steps=3, on_step=rows.append) == "done"
    assert all(np.isfinite(r.mean_reward) and np.isfinite(r.loss) for r in rows)
    assert trainer.best_placement().step_time == 0.0


def test_a_scorer_scores_the_samples_and_the_simulator_the_rest(chains, pair):
    """``placer train --reward measured`` and ``--ray`` hand the trainer a scorer; bounds stay the simulator's."""
    scored = []

    class Counting:
        def __init__(self, sim):
            self.sim = sim

        def run_batch(self, assignments):
            scored.append(len(assignments))
            return self.sim.run_batch(assignments)

    trainer = Trainer(chains, pair, _config(samples=4), scorer=Counting)
    assert isinstance(trainer.scorer, Counting) and trainer.scorer.sim is trainer.sim
    train(trainer, max_steps=2)
    assert scored == [4, 4]
    trainer.score(np.zeros((3, trainer.grouping.num_groups), dtype=np.int64), simulated=True)
    assert scored == [4, 4]


def test_a_graph_too_big_for_g_groups_trains_on_more():
    """Three ops each holding 40% of a device cannot share groups: asked for 1 group, the run gets 3."""
    from placer.graph import OpGraph
    from tests.placer.helpers import op, two_device_cluster

    g = OpGraph("big", [op("a", params=40.0), op("b", ["a"], params=40.0), op("c", ["b"], params=40.0)])
    trainer = Trainer(g, two_device_cluster(memory=100.0), _config(groups=1))
    assert trainer.grouping.num_groups == 3
    train(trainer, max_steps=2)
    assert trainer.best_placement().meta["groups"] == 3
