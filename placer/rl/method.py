"""The learned placer as registry method ``rl``: train briefly, return the best placement seen.

`placer place --method rl --budget-seconds S` and the service's placements
come here; `placer train` is the long, resumable form with files and
checkpoints (both use `placer.rl.trainer`).

How ``rl`` gets into the registry: imports go downward only, so the
registry (`placer.placers`) cannot import the learned placer that sits above
it. This module registers the method when it is imported, and the ``rl``
package imports it (`placer/rl/__init__.py`), so ``import placer.rl`` makes
``rl`` a method. The layers above rl that offer it (the CLI's ``place`` and
``compare``, the service) import ``placer.rl`` before they ask the registry;
code that imports only `placer.placers` sees the heuristics alone.
"""

from __future__ import annotations

import math
from typing import Callable

from placer.cluster import Cluster
from placer.errors import PlacerError
from placer.graph import OpGraph
from placer.placement import Placement
from placer.placers.registry import register

DEFAULT_BUDGET_SECONDS = 60.0


@register("rl", heuristic=False,
          description="learned: seq2seq policy trained by REINFORCE against the simulator "
                      "(options: budget_seconds, seed, steps, samples, groups, warm_start, starts=K races K "
                      "heuristic warm starts; policy=DIR|'shipped' "
                      "places zero-shot with a pre-trained policy, best_of=K samples, budget_seconds/steps "
                      "then fine-tune it)")
def rl(graph: OpGraph, cluster: Cluster, *, budget_seconds: float | None = None, seed: int = 0,
       steps: int | None = None, samples: int | None = None, groups: int | None = None,
       warm_start: str = "heuristic", policy: str | None = None, best_of: int | None = None,
       starts: int = 1, on_step: Callable | None = None) -> Placement:
    """Train a placement policy for `budget_seconds` (or `steps`) and return the best placement it found.

    With `policy`, start from a pre-trained policy instead: without a budget
    or steps it places zero-shot (no training, `placer.rl.zero_shot`), with
    them it fine-tunes (`placer.rl.finetune`).

    Parameters
    ----------
    graph, cluster : what to place, and where.
    budget_seconds : wall-clock budget, warm start and compilation included.
    seed : seeds the weights and the samples.
    steps : stop after this many REINFORCE steps (whichever of the two comes first).
    samples, groups : K and G of `placer.rl.trainer.TrainConfig` (defaults there).
    warm_start : ``"heuristic"`` (imitate the best heuristic first) or ``"none"`` (the paper's cold start).
    policy : a pre-trained policy folder (`placer pretrain`), or ``"shipped"`` for the package's own.
    best_of : zero-shot decoding: 0 greedy, K the best of greedy plus K seeded samples (default
        `placer.rl.zero_shot.DEFAULT_SAMPLES`, as the service answers).
    starts : race REINFORCE from this many of the fastest distinct heuristic placements by
        successive halving (`placer.rl.race`); 1 trains from the fastest alone.
    on_step : called with each REINFORCE step's `placer.rl.trainer.StepStats` (the whole run's, when
        racing), e.g. to show progress; not called when placing zero-shot.

    Raises
    ------
    PlacerError
        On a budget that is not a positive number, or a bad training option.
    """
    _check_starts(starts, policy, warm_start)
    if on_step is not None and not callable(on_step):
        raise PlacerError(f"rl: on_step must be a function of each step's statistics, got {on_step!r}")
    if policy is not None and budget_seconds is None and steps is None:
        return _zero_shot(graph, cluster, policy, best_of, seed, groups)  # NumPy only: no TensorFlow import
    from placer.rl.trainer import TrainConfig, Trainer, train

    if budget_seconds is None:
        budget_seconds = DEFAULT_BUDGET_SECONDS
    if isinstance(budget_seconds, bool) or not isinstance(budget_seconds, (int, float)) \
            or not math.isfinite(budget_seconds) or budget_seconds <= 0:
        raise PlacerError(f"rl: budget_seconds must be a positive number, got {budget_seconds!r}")
    if steps is not None and (not isinstance(steps, int) or isinstance(steps, bool) or steps < 1):
        raise PlacerError(f"rl: steps must be a positive integer, got {steps!r}")
    options = {k: v for k, v in (("samples", samples), ("groups", groups)) if v is not None}
    config = TrainConfig(seed=seed, warm_start=warm_start, **options)
    if starts > 1:
        return _race(graph, cluster, config, starts, float(budget_seconds), steps, on_step)
    if policy is not None:
        from placer.rl.finetune import fine_tuner

        trainer = fine_tuner(graph, cluster, _load(policy), config, groups=groups)
    else:
        trainer = Trainer(graph, cluster, config)
    train(trainer, budget_seconds=float(budget_seconds), max_steps=steps, on_step=on_step)
    return trainer.best_placement()


def _check_starts(starts, policy: str | None, warm_start: str) -> None:
    if type(starts) is int and starts == 1:  # one start, no race: nothing to check (and no TensorFlow import)
        return
    from placer.rl.race import MAX_STARTS  # imports the trainer, and so TensorFlow

    if isinstance(starts, bool) or not isinstance(starts, int) or not 1 <= starts <= MAX_STARTS:
        raise PlacerError(f"rl: starts must be an integer from 1 to {MAX_STARTS}, got {starts!r}")
    if starts > 1 and (policy is not None or warm_start != "heuristic"):
        raise PlacerError("rl: starts races heuristic warm starts; it does not go with "
                          + ("policy" if policy is not None else f"warm_start {warm_start!r}"))


def _race(graph: OpGraph, cluster: Cluster, config, starts: int, budget_seconds: float,
          steps: int | None, on_step: Callable | None) -> Placement:
    """Race `starts` heuristic warm starts (finding them counts against the budget)."""
    from placer.rl.race import race_or_trainer, run

    trainer = race_or_trainer(graph, cluster, config, starts)
    run(trainer, budget_seconds=budget_seconds, max_steps=steps, on_step=on_step)
    return trainer.best_placement()


def _load(policy: str):
    from placer.rl.saved_policy import load_policy

    if not isinstance(policy, str) or not policy:
        raise PlacerError(f"rl: policy must be a policy folder or 'shipped', got {policy!r}")
    return load_policy(policy)


def _zero_shot(graph: OpGraph, cluster: Cluster, policy: str, best_of: int | None, seed: int,
               groups: int | None) -> Placement:
    from placer.rl.zero_shot import DEFAULT_SAMPLES, MAX_SAMPLES, place_zero_shot

    if best_of is not None and (isinstance(best_of, bool) or not isinstance(best_of, int)
                                or not 0 <= best_of <= MAX_SAMPLES):
        # named as the caller named it (best_of, --best-of), not as place_zero_shot's samples
        raise PlacerError(f"rl: best_of must be an integer from 0 (greedy) to {MAX_SAMPLES}, got {best_of!r}")
    samples = DEFAULT_SAMPLES if best_of is None else best_of
    return place_zero_shot(graph, cluster, _load(policy), samples=samples, seed=seed, groups=groups)
