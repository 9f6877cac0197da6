"""The seq2seq policy: shapes, seeded sampling, teacher forcing, any number of devices."""

import numpy as np
import pytest
import tensorflow as tf

from placer.rl.policy import PlacementPolicy, PolicyConfig


@pytest.fixture(scope="module")
def policy():
    return PlacementPolicy(PolicyConfig(group_features=6, device_features=3, hidden=16, attention=16), seed=1)


def _inputs(groups=9, devices=3):
    rng = np.random.default_rng(0)
    return (tf.constant(rng.normal(size=(groups, 6)), tf.float32),
            tf.constant(rng.normal(size=(devices, 3)), tf.float32))


def test_sampling_shapes_and_ranges(policy):
    g, d = _inputs()
    out = policy.decode(g, d, 5, tf.constant([0, 0]))
    assert out.actions.shape == (5, 9) and out.log_prob.shape == (5,) and out.entropy.shape == (5,)
    assert out.actions.numpy().min() >= 0 and out.actions.numpy().max() < 3
    assert (out.log_prob.numpy() < 0).all()
    assert (out.entropy.numpy() > 0).all() and (out.entropy.numpy() <= np.log(3) + 1e-5).all()


def test_same_seed_same_samples(policy):
    g, d = _inputs()
    a = policy.decode(g, d, 8, tf.constant([3, 4])).actions.numpy()
    b = policy.decode(g, d, 8, tf.constant([3, 4])).actions.numpy()
    c = policy.decode(g, d, 8, tf.constant([3, 5])).actions.numpy()
    np.testing.assert_array_equal(a, b)
    assert (a != c).any()


def test_teacher_forcing_scores_what_was_sampled(policy):
    g, d = _inputs()
    sampled = policy.decode(g, d, 4, tf.constant([1, 1]))
    forced = policy.decode(g, d, 4, tf.constant([0, 0]), actions=sampled.actions)
    np.testing.assert_array_equal(forced.actions.numpy(), sampled.actions.numpy())
    np.testing.assert_allclose(forced.log_prob.numpy(), sampled.log_prob.numpy(), rtol=1e-5)


def test_greedy_is_deterministic_and_most_likely(policy):
    g, d = _inputs()
    a = policy.decode(g, d, 1, tf.constant([0, 0]), greedy=True)
    b = policy.decode(g, d, 1, tf.constant([9, 9]), greedy=True)
    np.testing.assert_array_equal(a.actions.numpy(), b.actions.numpy())
    samples = policy.decode(g, d, 64, tf.constant([2, 2]))
    assert a.log_prob.numpy()[0] >= samples.log_prob.numpy().max() - 1e-5


@pytest.mark.parametrize("devices", [2, 5, 8])
def test_one_policy_any_number_of_devices(policy, devices):
    g, d = _inputs(groups=7, devices=devices)
    out = policy.decode(g, d, 3, tf.constant([0, 1]))
    assert out.actions.numpy().max() < devices
