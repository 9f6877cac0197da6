"""The temperature a policy's zero-shot samples are drawn at, chosen on validation graphs.

After pre-training, a policy is confident: at temperature 1 most of its
best-of-K samples repeat the greedy placement, so K samples explore little.
Dividing the logits by a temperature above 1 spreads them while the greedy
placement (always a candidate) stays the same. Which temperature is best is
measured, not guessed: best-of-K step time over the teacher's, geometric mean
over the validation environments (graphs of families neither trained on nor
held out), for each of `TEMPERATURES`; the fastest is written to the policy's
card (``sampling``) and `placer.rl.zero_shot` samples at it.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any, Callable, Protocol, Sequence

import numpy as np

from placer.cluster import Cluster
from placer.errors import PlacerError
from placer.rl.features import DecodeContext
from placer.grouping import Grouping
from placer.rl.saved_policy import SavedPolicy
from placer.rl.zero_shot import DEFAULT_SAMPLES, candidate_placements, fastest
from placer.simulator import Simulator

TEMPERATURES = (1.0, 1.5, 2.0, 3.0, 4.0, 6.0, 8.0)


class ValidationEnv(Protocol):
    """What scoring needs of an environment (`placer.rl.pretrain.Environment` is one)."""

    key: str
    cluster: Cluster
    sim: Simulator
    grouping: Grouping
    group_feats: np.ndarray
    device_feats: np.ndarray
    context: DecodeContext
    teacher_step_time: float


def at_temperature(policy: SavedPolicy, temperature: float) -> SavedPolicy:
    """The same weights, their card saying samples are drawn at `temperature`."""
    return replace(policy, card={**policy.card, "sampling": {**(policy.card.get("sampling") or {}),
                                                             "temperature": float(temperature)}})


def best_of_ratio(policy: SavedPolicy, env: ValidationEnv, samples: int, seed: int) -> float:
    """Best-of-K step time (greedy plus `samples` at the card's temperature) over the teacher's; inf on OOM."""
    candidates = candidate_placements(policy, env.group_feats, env.device_feats, samples, seed, env.context)
    res = env.sim.run_batch(env.grouping.expand(candidates))
    k = fastest(res.step_time, res.oom)
    return math.inf if res.oom[k] else float(res.step_time[k] / env.teacher_step_time)


def choose_temperature(policy: SavedPolicy, envs: Sequence[ValidationEnv], *, samples: int = DEFAULT_SAMPLES,
                       temperatures: Sequence[float] = TEMPERATURES, seed: int = 0,
                       on_temperature: Callable[[float, float], None] | None = None,
                       should_stop: Callable[[], bool] = lambda: False) -> dict[str, Any] | None:
    """The card's ``sampling`` entry: the temperature whose best-of-`samples` is fastest on `envs`.

    Ties go to the lower temperature. The entry records the sweep (geometric mean of step time
    over the teacher's per temperature), so the choice can be checked. `on_temperature` is called
    with each temperature and its ratio as it is measured (for progress). None when `should_stop`
    (asked before each environment) says to stop before the sweep is done.

    Raises
    ------
    PlacerError
        With no environments, or no positive temperatures to try.
    """
    if not envs:
        raise PlacerError("choosing a sampling temperature needs validation graphs")
    if not temperatures or any(not (math.isfinite(t) and t > 0) for t in temperatures):
        raise PlacerError(f"temperatures must be positive numbers, got {list(temperatures)!r}")
    sweep: dict[str, float] = {}
    for t in sorted(temperatures):
        tempered = at_temperature(policy, t)
        ratios = []
        for env in envs:
            if should_stop():
                return None
            ratios.append(best_of_ratio(tempered, env, samples, seed))
        sweep[f"{t:g}"] = float(np.exp(np.mean(np.log(ratios))))
        if on_temperature is not None:
            on_temperature(t, sweep[f"{t:g}"])
    best = min(sweep, key=lambda t: (sweep[t], float(t)))
    return {"temperature": float(best), "samples": int(samples), "seed": int(seed),
            "chosen_on": sorted(env.key for env in envs), "geomean_ratio_to_teacher": sweep}
