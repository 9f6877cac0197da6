"""What a training run is at any moment, besides its network and optimizer: the state a checkpoint saves
(`TrainerState`, with the best placements as `Best`), one step's samples (`Rollout`) and its statistics
(`StepStats`, one row of ``history.csv``).

Kept apart from the loop that changes them (`placer.rl.trainer`): checkpoints (`placer.rl.checkpoint`),
races (`placer.rl.race`) and the command line read and write these without the policy.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from placer.rl import reinforce
from placer.rl.config import TrainConfig

SAVED_BEFORE_GROUPING_DEFAULTS = {"kind_groups": False, "balanced_groups": False}
"""How a run saved before `TrainConfig` had these fields grouped its ops (heavy edges alone)."""


def config_from_saved(config: dict[str, Any]) -> TrainConfig:
    """The config a saved run was trained with: a field it does not name takes its value from then, not now."""
    return TrainConfig(**{**SAVED_BEFORE_GROUPING_DEFAULTS, **config})


@dataclass
class Best:
    """The best placement seen so far (non-OOM beats OOM, then lower step time)."""

    step_time: float = math.inf
    oom: bool = True
    group_devices: list[int] = field(default_factory=list)
    step: int = -1
    elapsed_seconds: float = 0.0
    op_devices: list[int] = field(default_factory=list)
    """The placement itself where the groups cannot express it (`TrainerState.floor`)."""
    source: str = ""
    """Where it came from (`placer.rl.starts`: ``zero-shot``, ``heuristic:NAME``, ``trained``)."""

    def better(self, step_time: float, oom: bool) -> bool:
        """Whether a placement of `step_time` and `oom` beats this one (`placer.rl.reinforce.better`)."""
        return reinforce.better(step_time, oom, self.step_time, self.oom)


@dataclass
class TrainerState:
    """Everything besides the network and optimizer that a resumed run needs."""

    step: int = 0
    samples: int = 0
    elapsed_seconds: float = 0.0
    baseline: float | None = None
    best: Best = field(default_factory=Best)
    warm_start: dict[str, Any] = field(default_factory=dict)
    floor: Best = field(default_factory=Best)
    """The fastest placement the run was given before training (the best heuristic, a fine-tune's zero-shot
    answer), op by op, since the groups may not express it (`placer.rl.starts`); the run never returns worse.
    Kept apart from `best`, which REINFORCE replays and which follows every improvement from its start."""
    trained: Best = field(default_factory=Best)
    """The best placement a REINFORCE step sampled (the replayed best left out): `placer.rl.starts.kept`."""
    entropy_scale: float = 1.0
    """The entropy bonus's multiplier now (`placer.rl.reinforce.next_entropy_scale`)."""

    @property
    def returned(self) -> Best:
        """What the run answers: `best`, or `floor` while nothing has beaten it."""
        return self.floor if self.floor.op_devices and self.best.better(self.floor.step_time, self.floor.oom) \
            else self.best

    def offer_floor(self, start: Best) -> None:
        """Make `start` (with its ``op_devices``) the floor if it beats the floor so far."""
        if not self.floor.op_devices or self.floor.better(start.step_time, start.oom):
            self.floor = start

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "TrainerState":
        d = dict(d)
        d["best"] = Best(**d.get("best", {}))
        d["floor"] = Best(**d.get("floor", {}))
        d["trained"] = Best(**d.get("trained", {}))
        return cls(**d)


@dataclass
class StepStats:
    """Named scalars of one step (one row of ``history.csv``)."""

    step: int
    elapsed_seconds: float
    samples: int
    mean_step_time: float
    min_step_time: float
    best_step_time: float
    mean_reward: float
    baseline: float
    entropy: float
    """Mean over samples and groups of the policy's per-group entropy (nats)."""
    entropy_weight: float
    """The entropy bonus's weight this step (the configured one, grown while the entropy is low)."""
    oom_fraction: float
    loss: float
    grad_norm: float
    samples_per_second: float

    FIELDS = ("step", "elapsed_seconds", "samples", "mean_step_time", "min_step_time", "best_step_time",
              "mean_reward", "baseline", "entropy", "entropy_weight", "oom_fraction", "loss", "grad_norm",
              "samples_per_second")


@dataclass
class Rollout:
    """One step's samples, simulated (`Trainer.rollout`): what `Trainer.learn` learns from."""

    actions: np.ndarray
    """Device of each group per sample ``[K, G]``."""
    entropy: np.ndarray
    """The policy's entropy per sample ``[K]``."""
    step_time: np.ndarray
    """Simulated step time (max load with the throughput objective) per sample ``[K]``."""
    oom: np.ndarray
    """Whether each sample runs out of memory ``[K]``."""
    reward: np.ndarray
    """Reward per sample ``[K]``."""
    started: float
    """`time.perf_counter` when the step began."""
    replayed: bool = False
    """Whether the last sample is the best placement so far, replayed (not sampled)."""
