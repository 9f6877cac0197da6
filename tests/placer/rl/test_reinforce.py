"""`placer.rl.reinforce`: the reward, advantage, baseline and best-so-far rules of both trainers."""

import numpy as np
import pytest

from placer.rl import reinforce


def test_the_reward_is_minus_the_root_of_the_cost_over_the_bound_less_the_oom_penalty():
    cost, oom, overflow = np.array([4.0, 9.0]), np.array([False, True]), np.array([-0.5, 0.25])
    assert reinforce.rewards(cost, oom, overflow, 1.0, 2.0).tolist() == [-2.0, -3.0 - 2.0 * 1.25]


def test_a_zero_bound_scales_by_one_second():
    """-sqrt(t / 0) made the first update's weights NaN."""
    assert reinforce.rewards(np.array([4.0]), np.array([False]), np.array([0.0]), 0.0, 1.0).tolist() == [-2.0]


def test_equal_rewards_have_no_advantage_and_outliers_are_clipped():
    assert reinforce.advantages(np.full(4, -1.0), -1.0).tolist() == [0.0] * 4
    a = reinforce.advantages(np.array([0.0, 0.0, 0.0, 100.0]), 0.0)
    assert a.dtype == np.float32 and a.max() <= reinforce.ADVANTAGE_CLIP


def test_the_first_baseline_is_the_mean_then_a_moving_average():
    reward = np.array([-1.0, -3.0])
    assert reinforce.baseline_now(None, reward) == -2.0 and reinforce.baseline_now(-5.0, reward) == -5.0
    assert reinforce.next_baseline(-5.0, reward, 0.9) == pytest.approx(0.9 * -5.0 + 0.1 * -2.0)


def test_fitting_beats_oom_then_the_first_of_the_fastest():
    assert reinforce.best_sample(np.array([3.0, 1.0, 2.0, 2.0]), np.array([False, True, False, False])) == 2
    assert reinforce.better(9.0, False, 1.0, True) and not reinforce.better(1.0, True, 9.0, False)
    assert not reinforce.better(2.0, False, 2.0, False)


def test_the_entropy_scale_doubles_under_the_floor_and_halves_back_over_it():
    from placer.rl.reinforce import MAX_ENTROPY_SCALE, next_entropy_scale

    assert next_entropy_scale(1.0, 0.01, 0.05) == 2.0 and next_entropy_scale(4.0, 0.01, 0.05) == 8.0
    assert next_entropy_scale(MAX_ENTROPY_SCALE, 0.0, 0.05) == MAX_ENTROPY_SCALE
    assert next_entropy_scale(8.0, 0.5, 0.05) == 4.0 and next_entropy_scale(1.0, 0.5, 0.05) == 1.0
    assert next_entropy_scale(1.0, 0.0, 0.0) == 1.0  # a floor of 0: a fixed bonus
