"""Robust training's rewards: half from the nominal world, half from one drawn around it.

A policy trained on the exact numbers of one cost model learns placements
that win only there (`placer.placers.robustness` rescores them in worlds where
the numbers are off). With ``world_sigma`` > 0 (`placer.rl.config.RLConfig`)
each REINFORCE step also scores its samples in one world drawn for that step
(`placer.placers.robustness.random_world`: op costs, bandwidths, latencies and
GPU speed times lognormal factors), and the reward is the mean of the two.
The world is seeded by ``(seed, step)``, so a resumed run draws the same ones.
"""

from __future__ import annotations

import numpy as np

from placer.cluster import Cluster
from placer.graph import OpGraph
from placer.grouping import Grouping
from placer.placers.robustness import random_world
from placer.rl import reinforce
from placer.simulator import Simulator

WORLD_STREAM = 1
"""Seeds a step's random world apart from its samples."""


def world_rng(seed: int, step: int) -> np.random.Generator:
    """The generator of step `step`'s world."""
    return np.random.default_rng([seed, step, WORLD_STREAM])


def world_rewards(graph: OpGraph, cluster: Cluster, times: np.ndarray, op_devices: np.ndarray, oom_penalty: float,
                  rng: np.random.Generator, sigma: float) -> np.ndarray:
    """Rewards ``[K]`` of placements of ops ``[K, num_ops]`` in one world drawn around the nominal one
    (`times`: its compute seconds), scaled by that world's own lower bound as the nominal reward is by its."""
    world = random_world(graph, cluster, times, rng, sigma)
    sim = Simulator(world.graph, world.cluster, times=world.times)
    return reinforce.simulated_rewards(sim.run_batch(op_devices), sim.memory_bytes, sim.lower_bound, oom_penalty)


def robust_rewards(nominal: np.ndarray, sim: Simulator, grouping: Grouping, group_devices: np.ndarray,
                   oom_penalty: float, seed: int, step: int, sigma: float) -> np.ndarray:
    """The mean of the `nominal` rewards of placements of groups ``[K, G]`` (scored by `sim`) and their
    `world_rewards` in step `step`'s world; `nominal` itself at sigma 0, with no work done."""
    if sigma <= 0:
        return nominal
    drawn = world_rewards(sim.graph, sim.cluster, sim.times, grouping.expand(group_devices), oom_penalty,
                          world_rng(seed, step), sigma)
    return 0.5 * (nominal + drawn)
