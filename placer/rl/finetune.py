"""Fine-tuning: per-graph REINFORCE (`placer.rl.trainer`) that starts from a pre-trained policy.

The trainer is built with the policy's sizes (hidden units, G) and no
heuristic warm start; the policy's weights are copied in before the first
step, its greedy placement is scored and becomes the best so far (so a
fine-tuned run never returns worse than zero-shot), and every placement it
returns says which policy it started from.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

import numpy as np

from placer.cluster import Cluster
from placer.graph import OpGraph
from placer.placement import Placement
from placer.rl.saved_policy import SavedPolicy, assign_to
from placer.rl.trainer import Best, TrainConfig, Trainer

WARM_START_METHOD = "policy"


class FineTuner(Trainer):
    """A `Trainer` whose placements name the pre-trained policy it started from.

    Build with `fine_tuner`; a resumed run (``placer train --resume``) is
    recognised by its saved warm start (``{"method": "policy", ...}``).
    """

    def best_placement(self) -> Placement:
        placement = super().best_placement()
        start = self.state.warm_start
        placement.meta["policy"] = {**placement.meta.get("policy", {}), **start.get("policy", {}),
                                    "fine_tuned": self.state.step > 0}
        return placement


def fine_tune_config(policy: SavedPolicy, config: TrainConfig | None = None) -> TrainConfig:
    """`config` (or the defaults) with the policy's sizes and no heuristic warm start."""
    return replace(config or TrainConfig(), groups=policy.groups, hidden=policy.hidden, warm_start="none")


def fine_tuner(graph: OpGraph, cluster: Cluster, policy: SavedPolicy,
               config: TrainConfig | None = None) -> FineTuner:
    """A trainer for `graph` on `cluster` starting from `policy`, its greedy placement already scored.

    Parameters
    ----------
    graph, cluster : what to place, and where.
    policy : the pre-trained policy (`placer.rl.saved_policy.load_policy`).
    config : other hyperparameters (learning rate, samples, seed...); sizes come from the policy.
    """
    t0 = time.perf_counter()
    trainer = FineTuner(graph, cluster, fine_tune_config(policy, config))
    assign_to(trainer.policy, policy)
    start_greedy(trainer, policy)
    # setup (grouping, features, tracing, the greedy placement) counts toward the run's budget, as a
    # heuristic warm start's does in `placer.rl.trainer.train`
    trainer.state.elapsed_seconds += time.perf_counter() - t0
    return trainer


def start_greedy(trainer: Trainer, policy: SavedPolicy) -> dict[str, Any]:
    """Score the policy's greedy placement, make it the best so far, and mark the warm start done."""
    greedy = trainer.greedy()[None, :]
    step_time, oom, _ = trainer.score(greedy)
    trainer.state.best = Best(float(step_time[0]), bool(oom[0]), greedy[0].tolist(), 0, 0.0)
    trainer.state.warm_start = {"method": WARM_START_METHOD, "policy": {**policy.describe(), "fine_tuned": False},
                                "greedy_step_time": float(step_time[0]), "greedy_oom": bool(oom[0])}
    return trainer.state.warm_start


def greedy_equals_zero_shot(trainer: Trainer, policy: SavedPolicy) -> bool:
    """Whether the TensorFlow policy's greedy placement is the NumPy zero-shot one (a consistency check)."""
    from placer.rl.features import device_features
    from placer.rl.numpy_policy import decode

    acts, _ = decode(policy.weights, trainer.group_feats.numpy(), device_features(trainer.cluster), 1)
    return bool(np.array_equal(acts[0], trainer.greedy()))
