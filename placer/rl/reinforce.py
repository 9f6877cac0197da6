"""The arithmetic of one REINFORCE step, shared by training (`placer.rl.trainer`) and pre-training.

For K sampled placements with costs ``c_k`` (simulated step times, or max
loads with the throughput objective) against a lower bound ``L``:

    reward     r_k = -sqrt(c_k / L) - [oom_k] * oom_penalty * (1 + max(overflow_k, 0))
    advantage  A_k = clip((r_k - b) / (std(r) + eps), -5, 5)
    baseline   b'  = decay * b + (1 - decay) * mean(r),   b = mean(r) at the first step

Dividing by the lower bound puts every graph on the same scale (1 is
perfect), which a policy trained across graphs needs. The best placement so
far is the one that fits in memory, then the fastest (`better`); among a
step's samples, ties go to the first (`best_sample`).

The entropy bonus's weight adapts (`next_entropy_scale`): a policy that
collapsed onto one placement (per-group entropy 0.000 by step 900 of a
fine-tune, issue #42) spends the rest of its budget sampling that one
placement, and REINFORCE, which compares samples, learns nothing more. A
fixed schedule cannot know when that happens, and restarts throw away what
was learnt; so, as SAC tunes its temperature to a target entropy (Haarnoja et
al. 2018), the weight doubles each step the entropy is under its floor and
halves back towards the configured weight each step it is over.
"""

from __future__ import annotations

import numpy as np

ADVANTAGE_CLIP = 5.0
"""Advantages are clipped to ``[-ADVANTAGE_CLIP, ADVANTAGE_CLIP]`` batch standard deviations."""
STD_EPSILON = 1e-6
"""Added to the batch's reward spread, so that K equal rewards give advantages 0, not NaN."""


def reward_scale(bound: float) -> float:
    """What costs are divided by in the reward: the lower bound, or 1 where it is 0 (ops that all cost
    nothing): -sqrt(t / 0) was NaN (0 / 0) or -inf, and the first update made the policy's weights NaN."""
    return bound if bound > 0 else 1.0


def rewards(cost: np.ndarray, oom: np.ndarray, overflow: np.ndarray, bound: float,
            oom_penalty: float) -> np.ndarray:
    """Reward ``[K]`` of K placements from their costs, OOM flags and worst memory overflows ``[K]``
    (a fraction of the device's memory; negative where it fits)."""
    reward = -np.sqrt(cost / reward_scale(bound))
    return reward - oom * oom_penalty * (1.0 + np.maximum(overflow, 0.0))


def simulated_rewards(res, memory_bytes: np.ndarray, bound: float, oom_penalty: float) -> np.ndarray:
    """`rewards` of a batch a simulator scored (``res``: `Simulator.run_batch`'s step times, OOM flags and
    peak memory per device), the overflow measured against each device's `memory_bytes`."""
    overflow = np.max(res.peak_memory / memory_bytes[None, :] - 1.0, axis=1)
    return rewards(res.step_time, res.oom, overflow, bound, oom_penalty)


def baseline_now(baseline: float | None, reward: np.ndarray) -> float:
    """The baseline a step compares its rewards with: the moving average, or at the first step their mean."""
    return float(reward.mean()) if baseline is None else baseline


def advantages(reward: np.ndarray, baseline: float) -> np.ndarray:
    """Advantage ``[K]`` (float32) of each sample: its reward over `baseline`, in batch standard deviations,
    clipped."""
    advantage = np.clip((reward - baseline) / (reward.std() + STD_EPSILON), -ADVANTAGE_CLIP, ADVANTAGE_CLIP)
    return advantage.astype(np.float32)


def next_baseline(baseline: float, reward: np.ndarray, decay: float) -> float:
    """The moving average after a step with rewards `reward` (`baseline` is `baseline_now`'s)."""
    return decay * baseline + (1 - decay) * float(reward.mean())


def best_sample(cost: np.ndarray, oom: np.ndarray) -> int:
    """Index of the best of K samples: the fastest that fits, else the fastest; the first among equals."""
    return int(np.lexsort((cost, oom))[0])


def better(cost: float, oom: bool, than_cost: float, than_oom: bool) -> bool:
    """Whether a placement of `cost` and `oom` beats the best so far: fitting beats OOM, then lower cost."""
    return (not oom and than_oom) or (oom == than_oom and cost < than_cost)


ENTROPY_SCALE_STEP = 2.0
"""Factor by which the entropy bonus's weight grows (under the floor) or shrinks back (over it) per step."""
MAX_ENTROPY_SCALE = 64.0
"""The most the entropy bonus's weight grows over the configured one."""


def next_entropy_scale(scale: float, entropy: float, floor: float) -> float:
    """The entropy bonus's multiplier after a step whose mean per-group entropy was `entropy` (nats):
    `ENTROPY_SCALE_STEP` times larger under `floor` (at most `MAX_ENTROPY_SCALE`), else as much smaller
    (at least 1). A `floor` of 0 keeps it at 1."""
    if entropy < floor:
        return min(scale * ENTROPY_SCALE_STEP, MAX_ENTROPY_SCALE)
    return max(scale / ENTROPY_SCALE_STEP, 1.0)
