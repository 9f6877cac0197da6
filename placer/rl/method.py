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

from typing import Annotated, Callable

from placer.cluster import Cluster
from placer.errors import PlacerError
from placer.graph import OpGraph
from placer.placement import Placement
from placer.placers.options import Option
from placer.placers.registry import register
from placer.rl.config import MAX_STARTS
from placer.rl.steering import steers
from placer.rl.zero_shot import DEFAULT_SAMPLES, MAX_SAMPLES, SAMPLED_OPS, default_samples

DEFAULT_BUDGET_SECONDS = 60.0
DEFAULT_POLICY = "shipped"
"""What ``rl`` fine-tunes unless told otherwise (as ``placer train``'s `placer.cli.train_start.DEFAULT_INIT`)."""
NO_POLICY = "none"
"""policy 'none': train from scratch."""


@register("rl", heuristic=False,
          description="learned: the shipped pre-trained policy's zero-shot answer fine-tuned by REINFORCE against "
                      "the simulator (never worse than that answer or the best heuristic); policy=DIR|'shipped' "
                      "without a budget places zero-shot, policy='none' trains from scratch")
def rl(
    graph: OpGraph, cluster: Cluster, *,
    budget_seconds: Annotated[float | None, Option(
        f"training budget in seconds, warm start and compilation included (default {DEFAULT_BUDGET_SECONDS:g}; "
        "with policy and no steps: none, it places zero-shot)", gt=0)] = None,
    seed: Annotated[int, Option("seeds the weights and the samples", ge=0)] = 0,
    steps: Annotated[int | None, Option("stop after this many REINFORCE steps, or the budget, whichever comes "
                                        "first (default: no limit)", ge=1)] = None,
    samples: Annotated[int | None, Option("placements sampled per REINFORCE step (default: placer train's)")] = None,
    groups: Annotated[int | None, Option("op groups the policy places (default: placer train's, or the "
                                         "pre-trained policy's)")] = None,
    warm_start: Annotated[str | None, Option("'heuristic' imitates the best heuristic first; 'none' does not "
                                             "(default: 'heuristic' from scratch, 'none' fine-tuning)")] = None,
    policy: Annotated[str | None, Option("a pre-trained policy folder (placer pretrain) or 'shipped': places "
                                         "zero-shot, or fine-tunes it with budget_seconds or steps; 'none': "
                                         "train from scratch (default: fine-tune the shipped policy, or train "
                                         "from scratch where it cannot address the cluster or starts > 1)")] = None,
    best_of: Annotated[int | None, Option(f"the zero-shot answer (a fine-tune's start) is the best of greedy "
                                          f"and K seeded samples (0: greedy alone; default {DEFAULT_SAMPLES}, "
                                          f"fewer on graphs of over {SAMPLED_OPS // DEFAULT_SAMPLES:,} ops)",
                                          ge=0, le=MAX_SAMPLES)] = None,
    steer: Annotated[bool | None, Option("let the policy's placements steer the list schedulers (HEFT, CPOP) "
                                         "op by op (placer.rl.steering): the zero-shot answer is the fastest, "
                                         "and fine-tuning starts from it (default: on; false: the policy's "
                                         "own answer)")] = None,
    starts: Annotated[int, Option("race REINFORCE from this many of the fastest distinct heuristic placements "
                                  "by successive halving (1: train from the fastest alone)", ge=1)] = 1,
    on_step: Callable | None = None,
    on_imitation: Callable | None = None,
) -> Placement:
    """Fine-tune a pre-trained policy (or train one) for `budget_seconds` (or `steps`) and return the best
    placement found, never worse than the policy's zero-shot answer or the best heuristic (`placer.rl.starts`;
    ``meta.kept`` says which it kept and why).

    With `policy` named and no budget or steps it places zero-shot (no
    training, `placer.rl.zero_shot`); otherwise it fine-tunes the policy
    (`placer.rl.finetune`; by default the shipped one), or with
    ``policy="none"`` trains from scratch.

    Parameters
    ----------
    graph, cluster : what to place, and where.
    budget_seconds : wall-clock budget, warm start and compilation included; the heuristic starts take at most
        half of it (`placer.rl.starts.HEURISTIC_SHARE`).
    seed : seeds the weights and the samples.
    steps : stop after this many REINFORCE steps (whichever of the two comes first).
    samples, groups : K and G of `placer.rl.trainer.TrainConfig` (defaults there).
    warm_start : ``"heuristic"`` (imitate the best heuristic first) or ``"none"`` (the paper's cold start; a
        fine-tune's default: it starts from the policy's answer).
    policy : a pre-trained policy folder (`placer pretrain`), ``"shipped"`` for the package's own (what a
        run fine-tunes by default), or ``"none"`` to train from scratch.
    best_of : zero-shot decoding, of the answer and of a fine-tune's start: 0 greedy, K the best of greedy
        plus K seeded samples (default `placer.rl.zero_shot.default_samples` of the graph's ops, as the
        service answers).
    steer : the policy's placements steering HEFT and CPOP op by op (`placer.rl.steering.steers`): the
        zero-shot answer is the fastest, and a fine-tune starts from it. None (the default) steers where there
        is a policy's answer; False does not; True is refused where the run trains from scratch.
    starts : race REINFORCE from this many of the fastest distinct heuristic placements by
        successive halving (`placer.rl.race`); 1 trains from the fastest alone.
    on_step : called with each REINFORCE step's `placer.rl.trainer.StepStats` (the whole run's, when
        racing), e.g. to show progress; not called when placing zero-shot.
    on_imitation : called after each step of the warm start's imitation (`placer.rl.trainer.train`'s).

    Options are typed above and checked by the registry (`placer.placers.registry.place`); the training
    ones (`samples`, `groups`, `warm_start`, `seed`'s upper bound) by `placer.rl.trainer.TrainConfig`.

    Raises
    ------
    PlacerError
        On more starts than a race takes, starts with a policy or a cold start, or a bad training option.
    """
    _check_starts(starts, policy, warm_start)
    if on_step is not None and not callable(on_step):
        raise PlacerError(f"method 'rl': on_step must be a function of each step's statistics, got {on_step!r}")
    if policy not in (None, NO_POLICY) and budget_seconds is None and steps is None:
        return _zero_shot(graph, cluster, policy, best_of, seed, groups, steers(steer))  # NumPy only: no TensorFlow
    from placer.rl.config import XLA_MIN_BUDGET_SECONDS
    from placer.rl.starts import heuristic_limit_of
    from placer.rl.trainer import TrainConfig, Trainer, train

    if budget_seconds is None:
        budget_seconds = DEFAULT_BUDGET_SECONDS
    options = {k: v for k, v in (("samples", samples), ("groups", groups)) if v is not None}
    saved = policy_to_fine_tune(policy, cluster, starts)
    limit = heuristic_limit_of(budget_seconds)
    config = TrainConfig(seed=seed, warm_start=warm_start or ("none" if saved is not None else "heuristic"),
                         **({"jit": False} if budget_seconds < XLA_MIN_BUDGET_SECONDS else {}), **options).check()
    if (steer or best_of is not None) and saved is None:  # steer given True; by default it steers a policy's answer
        why = ("policy 'none'" if policy == NO_POLICY else "starts > 1" if starts > 1 else
               f"{cluster.name!r} has more devices than the policy addresses")
        what = "steer steers" if steer else "best_of samples"
        raise PlacerError(f"method 'rl': {what} the pre-trained policy's answer, and this run trains from "
                          f"scratch ({why})")
    if starts > 1:
        return _race(graph, cluster, config, starts, float(budget_seconds), steps, on_step, on_imitation, limit)
    if saved is not None:
        from placer.rl.finetune import fine_tuner

        trainer = fine_tuner(graph, cluster, saved, config, heuristic=config.warm_start == "heuristic",
                             samples=best_of, groups=groups, heuristic_limit=limit,
                             steer=steers(steer))
    else:
        trainer = Trainer(graph, cluster, config, heuristic_limit=limit)
    train(trainer, budget_seconds=float(budget_seconds), max_steps=steps, on_step=on_step,
          on_imitation=on_imitation)
    return trainer.best_placement()


def policy_to_fine_tune(policy: str | None, cluster: Cluster, starts: int):
    """The `SavedPolicy` to fine-tune, or None to train from scratch: 'none', a race of heuristic starts,
    or (by default) a cluster the shipped policy cannot address."""
    if policy == NO_POLICY or (policy is None and starts > 1):
        return None
    saved = _load(policy or DEFAULT_POLICY)
    if policy is None:
        from placer.rl.finetune import can_place

        return saved if can_place(saved, cluster) else None
    return saved


def _check_starts(starts: int, policy: str | None, warm_start: str | None) -> None:
    """What the option types cannot say: a race's most starts, and that it races heuristic warm starts."""
    if starts == 1:  # one start, no race: nothing to check
        return
    if starts > MAX_STARTS:
        raise PlacerError(f"method 'rl': option starts must be an integer from 1 to {MAX_STARTS}, got {starts!r}")
    if starts > 1 and (policy not in (None, NO_POLICY) or warm_start == "none"):
        raise PlacerError("method 'rl': starts races heuristic warm starts; it does not go with "
                          + ("policy" if policy not in (None, NO_POLICY) else f"warm_start {warm_start!r}"))


def _race(graph: OpGraph, cluster: Cluster, config, starts: int, budget_seconds: float,
          steps: int | None, on_step: Callable | None, on_imitation: Callable | None,
          heuristic_limit: float | None) -> Placement:
    """Race `starts` heuristic warm starts (finding them counts against the budget)."""
    from placer.rl.race import race_or_trainer, run

    trainer = race_or_trainer(graph, cluster, config, starts, heuristic_limit)
    run(trainer, budget_seconds=budget_seconds, max_steps=steps, on_step=on_step, on_imitation=on_imitation)
    return trainer.best_placement()


def _load(policy: str):
    from placer.rl.saved_policy import load_policy

    return load_policy(policy)


def _zero_shot(graph: OpGraph, cluster: Cluster, policy: str, best_of: int | None, seed: int,
               groups: int | None, steer: bool) -> Placement:
    from placer.rl.zero_shot import place_zero_shot

    samples = default_samples(len(graph)) if best_of is None else best_of
    return place_zero_shot(graph, cluster, _load(policy), samples=samples, seed=seed, groups=groups, steer=steer)
