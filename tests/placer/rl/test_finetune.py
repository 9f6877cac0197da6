"""Fine-tuning from a pre-trained policy, with and without the heuristic warm start."""

from dataclasses import replace

import numpy as np
import pytest

from placer.rl.features import NUM_DEVICE_FEATURES, NUM_GROUP_FEATURES
from placer.rl.finetune import fine_tuner
from placer.rl.saved_policy import SavedPolicy, weights_of
from placer.rl.trainer import PENDING_IMITATION, TrainConfig, train
from placer.rl.zero_shot import DEFAULT_SAMPLES
from tests.placer.helpers import two_device_cluster
from tests.placer.rl.conftest import two_chains


def _policy(seed: int) -> SavedPolicy:
    from placer.rl.policy import PlacementPolicy, PolicyConfig

    tf_policy = PlacementPolicy(PolicyConfig(NUM_GROUP_FEATURES, NUM_DEVICE_FEATURES, 16, 16), seed=seed)
    return SavedPolicy(weights_of(tf_policy), {"name": "test", "version": "0", "hidden": 16, "groups": 10})


def _slowest_single_device(graph, cluster) -> tuple[str, np.ndarray, float]:
    """A heuristic start slower than any policy's answer, for tests of what a fine-tune does with its own."""
    from placer.simulator import Simulator

    sim = Simulator(graph, cluster)
    placements = [np.full(len(graph), d, dtype=np.int64) for d in range(len(cluster))]
    times = [sim.run(p).step_time for p in placements]
    d = int(np.argmax(times))
    return f"single_device:{cluster.devices[d].name}", placements[d], float(times[d])


@pytest.fixture(scope="module")
def setup():
    graph, cluster = two_chains(), two_device_cluster()
    split = np.array([0] * 5 + [1] * 5)  # one chain per device: 5 s, the optimum
    return graph, cluster, ("split", split, 5.0)


def test_without_heuristic_the_run_starts_from_the_policy_alone(setup):
    graph, cluster, reference = setup
    trainer = fine_tuner(graph, cluster, _policy(0), TrainConfig(samples=4, seed=0))
    start = trainer.state.warm_start
    assert trainer.config.warm_start == "none" and start.get(PENDING_IMITATION) != "heuristic"
    assert start["method"] == "policy" and start["samples"] == DEFAULT_SAMPLES
    assert trainer.state.best.step_time == start["start_step_time"] <= start["greedy_step_time"]


def test_a_sampled_start_is_imitated_before_reinforce(setup):
    """REINFORCE samples around the policy's mode, so a start that is a sample becomes the mode first."""
    graph, cluster, _ = setup
    trainer = fine_tuner(graph, cluster, _policy(0), TrainConfig(samples=4, seed=0))
    start = trainer.state.warm_start
    assert start["start"] != "greedy" and start["start_step_time"] < start["greedy_step_time"]
    chosen = np.tile(trainer.state.best.group_devices, (4, 1))
    before = float(trainer.log_prob(chosen)[0])
    assert train(trainer, max_steps=1) == "done"
    imitated = trainer.state.warm_start["imitated_start"]
    assert trainer.state.warm_start["method"] == "policy" and trainer.state.warm_start["start"] == start["start"]
    assert imitated["imitation_steps"] >= 1 and imitated["imitation_probability"] > 0.9
    assert float(trainer.log_prob(chosen)[0]) > before
    assert trainer.state.best.step_time <= start["start_step_time"]


def test_a_pending_imitation_survives_a_checkpoint(setup, tmp_path):
    """Stopped before `train` ran it, the saved run is still a fine-tune, and its resume imitates first."""
    from placer.rl import checkpoint
    from placer.rl.finetune import FineTuner

    graph, cluster, _ = setup
    trainer = fine_tuner(graph, cluster, _policy(0), TrainConfig(samples=4, seed=0))
    checkpoint.save(trainer, tmp_path)
    saved = checkpoint.load_state(tmp_path)
    assert saved["state"]["warm_start"][PENDING_IMITATION] == "start"
    resumed = FineTuner(graph, cluster, checkpoint.config_of(saved))
    checkpoint.restore(resumed, tmp_path, saved)
    assert resumed.temperature == trainer.temperature
    train(resumed, max_steps=1)
    assert resumed.state.warm_start["imitated_start"]["imitation_steps"] >= 1
    assert PENDING_IMITATION not in resumed.state.warm_start


def test_an_interrupted_imitation_of_the_start_stays_pending(setup):
    graph, cluster, _ = setup
    trainer = fine_tuner(graph, cluster, _policy(0), TrainConfig(samples=4, seed=0))
    assert train(trainer, max_steps=3, should_stop=lambda: True) == "interrupted"
    assert trainer.state.warm_start[PENDING_IMITATION] == "start" and trainer.state.step == 0


def test_a_greedy_start_is_not_imitated(setup):
    graph, cluster, _ = setup
    trainer = fine_tuner(graph, cluster, _policy(0), TrainConfig(samples=4, seed=0), samples=0)
    assert trainer.state.warm_start["start"] == "greedy" and PENDING_IMITATION not in trainer.state.warm_start
    train(trainer, max_steps=1)
    assert "imitated_start" not in trainer.state.warm_start


def test_a_faster_heuristic_is_imitated_from_the_pretrained_weights(setup):
    graph, cluster, reference = setup
    policy = _policy(0)
    trainer = fine_tuner(graph, cluster, policy, TrainConfig(samples=4, seed=0), heuristic=True, reference=reference,
                         samples=0)
    greedy = trainer.state.warm_start["greedy_step_time"]
    assert greedy > 5.0  # the untrained policy's own placement is worse than the split
    assert train(trainer, max_steps=1) == "done"
    start = trainer.state.warm_start
    assert start["method"] == "policy" and start["policy"]["name"] == "test"
    assert start["greedy_step_time"] == greedy and start["imitated"]["heuristic"] == "split"
    assert start["imitated"]["imitation_steps"] >= 1
    assert trainer.state.best.step_time == pytest.approx(5.0)
    placement = trainer.best_placement()
    assert placement.meta["policy"]["name"] == "test"
    # the heuristic's placement, found before any step: not the fine-tuned policy's
    assert placement.meta["found_at_step"] == 0 and placement.meta["policy"]["fine_tuned"] is False
    assert placement.meta["placed_by"] == "heuristic split"


def test_a_heuristic_no_faster_than_the_policy_is_not_imitated(setup):
    graph, cluster, _ = setup
    trainer = fine_tuner(graph, cluster, _policy(0), TrainConfig(samples=4, seed=0), heuristic=True,
                         reference=("slow", np.zeros(10, np.int64), 1e9))
    assert trainer.state.warm_start["method"] == "policy" and "imitated" not in trainer.state.warm_start
    train(trainer, max_steps=1)
    assert "imitated" not in trainer.state.warm_start


def test_the_temperature_brings_the_greedy_placements_probability_down_to_the_target(setup):
    from placer.rl.finetune import exploring_temperature

    graph, cluster, _ = setup
    policy = _policy(1)
    trainer = fine_tuner(graph, cluster, policy, TrainConfig(samples=4, seed=0))
    greedy = np.tile(trainer.greedy(), (4, 1))
    G = trainer.grouping.num_groups

    def per_group() -> float:  # by the trainer's compiled pass, which samples at that temperature
        return float(np.exp(trainer.log_prob(greedy)[0] / G))

    assert exploring_temperature(trainer, policy, target=1.0) == 1.0  # already below: left alone
    confident = per_group()
    target = 0.5 + (confident - 0.5) / 2  # halfway to a coin toss between the two devices
    t = exploring_temperature(trainer, policy, target=target)
    assert t > 1.0 and trainer.temperature == t and trainer.state.warm_start["temperature"] == t
    assert per_group() == pytest.approx(target, rel=1e-3)
    assert (trainer.greedy() == greedy[0]).all()  # the choices keep their order


@pytest.mark.parametrize("seed, second_round, coarse", [(0, False, False), (3, True, False), (2, True, True)])
def test_the_fine_tune_starts_from_the_zero_shot_answer(seed, second_round, coarse):
    """With the default K, the run's first best is the service's instant (best-of-K) placement, whichever
    round of samples it came from, and whether its member fine-tunes on its own groups or on coarser ones."""
    from placer import presets
    from placer.rl.saved_policy import load_policy
    from placer.rl.zero_shot import DEFAULT_SAMPLES, place_zero_shot
    from placer.synthetic import layered_graph

    graph, cluster, shipped = layered_graph(50, seed=seed), presets.get("2gpu"), load_policy()
    zero = place_zero_shot(graph, cluster, shipped, samples=DEFAULT_SAMPLES)
    assert (zero.meta["member_seed"] == len(shipped.members)) == second_round  # the second round's seed: 0 + 8
    member = shipped.members[zero.meta["pool_member"]]
    assert (member.groups < member.trained_groups) == coarse
    trainer = fine_tuner(graph, cluster, shipped, TrainConfig(samples=4, seed=0))
    assert trainer.state.best.step_time == pytest.approx(zero.step_time)


def test_groups_given_are_the_fine_tunes_groups(setup):
    """`placer train --init P --groups G` fine-tunes at G (it kept the policy's G, silently)."""
    graph, cluster, _ = setup
    trainer = fine_tuner(graph, cluster, _policy(0), TrainConfig(samples=4, seed=0, groups=4), groups=4)
    assert trainer.config.groups == 4 and trainer.grouping.num_groups <= 4
    described = trainer.state.warm_start["policy"]
    assert described["groups"] == 4 and described["trained_groups"] == 10
    assert fine_tuner(graph, cluster, _policy(0), TrainConfig(samples=4, seed=0)).config.groups == 10


def test_groups_given_reach_every_member_of_a_pool():
    from dataclasses import replace

    from placer import presets
    from placer.rl.saved_policy import load_policy
    from placer.synthetic import layered_graph

    graph, cluster, shipped = layered_graph(50, seed=2), presets.get("2gpu"), load_policy()
    trainer = fine_tuner(graph, cluster, replace(shipped, pooled=shipped.pooled[:1]), TrainConfig(samples=4),
                         samples=4, groups=8)
    assert trainer.config.groups == 8 and trainer.grouping.num_groups <= 8
    assert trainer.state.warm_start["policy"]["groups"] == 8


def test_the_registry_method_fine_tunes_at_the_groups_given():
    from placer import presets
    from placer.placers import registry
    from placer.synthetic import layered_graph

    p = registry.place("rl", layered_graph(50, seed=2), presets.get("2gpu"), policy="shipped", steps=1, samples=4,
                       groups=8)
    assert p.meta["groups"] <= 8 and p.meta["config"]["groups"] == 8 and p.meta["policy"]["groups"] == 8


def test_fine_tuned_says_whether_training_found_the_placement():
    """A run whose best is still its zero-shot start reports the policy as not fine-tuned (it said true after
    any step, and the service then showed the unchanged start as the fine-tuned policy's)."""
    from placer import presets
    from placer.rl.saved_policy import load_policy
    from placer.synthetic import layered_graph

    graph, cluster, shipped = layered_graph(50, seed=2), presets.get("2gpu"), load_policy()
    trainer = fine_tuner(graph, cluster, shipped, TrainConfig(samples=4, seed=0, jit=False), samples=4,
                         reference=_slowest_single_device(graph, cluster))  # the start stays the best
    assert train(trainer, max_steps=2) == "done"
    trainer.state.best = replace(trainer.state.best, step=0)  # as when no step beat the start
    meta = trainer.best_placement().meta
    assert meta["policy"]["fine_tuned"] is False and "placed_by" not in meta
    trainer.state.best = replace(trainer.state.best, step=2)
    assert trainer.best_placement().meta["policy"]["fine_tuned"] is True




@pytest.mark.parametrize("ops, seed", [(40, 4), (40, 2)])  # the projection slower than the answer; faster
def test_an_answer_on_coarser_groups_is_the_floor_while_the_member_trains_on_its_own(ops, seed):
    """A pool member placing at fewer groups than it learned on fine-tunes on its own groups from the answer's
    projection; the answer itself, op by op, is returned until something beats it."""
    from placer import presets
    from placer.rl.trainer import TrainerState
    from placer.rl.zero_shot import place_zero_shot
    from placer.synthetic import layered_graph

    graph, cluster, member = layered_graph(ops, seed=seed), presets.get("2gpu"), _policy(0)
    pool = replace(member.at_groups(4), pooled=(member.at_groups(3),))  # both pooled below the 10 it learned on
    answer = place_zero_shot(graph, cluster, pool, samples=8, seed=0)
    trainer = fine_tuner(graph, cluster, pool, TrainConfig(samples=4, seed=0, jit=False), samples=8,
                         reference=_slowest_single_device(graph, cluster))  # not the floor: the answer is
    assert trainer.config.groups == 10 and 4 < trainer.grouping.num_groups <= 10
    assert trainer.state.warm_start["policy"]["groups"] == 10
    ops = answer.assignment(graph, cluster)
    projected = trainer.grouping.project(ops, len(cluster), weights=trainer.times.min(axis=1))
    assert not np.array_equal(trainer.grouping.expand(projected), ops)  # the groups cannot express the answer
    state, start = trainer.state, trainer.state.warm_start
    assert state.best.group_devices == projected.tolist() and start[PENDING_IMITATION] == "start"
    assert state.best.step_time == pytest.approx(start["projected_step_time"])
    assert state.floor.op_devices == ops.tolist() and state.floor.step_time == pytest.approx(answer.step_time)
    placed = trainer.best_placement()
    if start["projected_step_time"] > answer.step_time:
        assert np.array_equal(placed.assignment(graph, cluster), ops)
        assert placed.meta["groups"] == placed.meta["policy"]["groups"] == answer.meta["groups"] <= 4
    else:
        assert placed.step_time == pytest.approx(start["projected_step_time"])
        assert placed.meta["groups"] == trainer.grouping.num_groups and placed.meta["policy"]["groups"] == 10
    assert placed.meta["policy"]["fine_tuned"] is False
    resumed = TrainerState.from_dict(state.to_dict())
    assert resumed.floor == state.floor and resumed.best == state.best
