"""Fine-tuning: per-graph REINFORCE (`placer.rl.trainer`) that starts from a pre-trained policy.

The trainer is built with the policy's sizes (hidden units, G); the
policy's weights are copied in before the first step, and its zero-shot
placement (the best of its greedy placement and K seeded samples, as the
service answers) is scored and becomes the best so far, so a fine-tuned run
never returns worse than zero-shot. Every placement it returns says which
policy it started from.

A pre-trained policy is often near-certain on a graph (the per-group
probability of its own choice close to 1): its samples are its
greedy placement, and REINFORCE has nothing to compare. So the fine-tune
samples and trains at a softmax temperature that brings that probability
down to the confidence a from-scratch run's warm start stops at
(`placer.rl.trainer.IMITATION_TARGET`); the policy's choices keep their order.

The start is often one of the K samples, not the greedy placement
(docs/experiments/pretrained-policy.md), and REINFORCE samples
around the policy's mode, so the policy first imitates its own start, as a
from-scratch run imitates its heuristic warm start, until that start's
per-group probability reaches the same target at the fine-tune's temperature.

A pool's answer often comes from a member placing at fewer groups than it
was trained on (the shipped pool's 64 of 128), and REINFORCE on those coarse
groups stalls: such a member is fine-tuned on its own groups, from the
answer's projection onto them, while the answer itself stays what the run
returns until a step beats it (`start_from_answer`).

The best heuristic always runs (`placer.rl.trainer.Trainer`): the run never
answers worse than it or the zero-shot answer (`placer.rl.starts`). With
``heuristic=True``, where it simulates faster than the policy's start, the
pre-trained weights first imitate it. A policy that starts
far off a graph then starts from where per-graph RL would, and what
pre-training adds is measured by the steps alone.
"""

from __future__ import annotations

import math
import time
from dataclasses import replace
from typing import Any, Callable

import numpy as np

from placer.cluster import Cluster
from placer.graph import OpGraph
from placer.placement import Placement
from placer.rl.saved_policy import SavedPolicy, assign_to
from placer.rl.starts import HEURISTIC, ZERO_SHOT
from placer.rl.trainer import IMITATION_TARGET, PENDING_IMITATION, Best, Scorer, TrainConfig, Trainer
from placer.simulator import Simulator
from placer.rl.zero_shot import candidate_placements, default_samples, fastest

WARM_START_METHOD = "policy"


class FineTuner(Trainer):
    """A `Trainer` whose placements name the pre-trained policy it started from.

    Build with `fine_tuner`; a resumed run (``placer train --resume``) is
    recognised by its saved warm start (``{"method": "policy", ...}``).
    """

    @property
    def temperature(self) -> float:
        """The temperature `fine_tuner` chose (saved in the warm start, so a resumed run keeps it)."""
        return float(self.state.warm_start.get("temperature", 1.0))

    def warm_start(self, should_stop: Callable[[], bool] = lambda: False,
                   on_imitation: Callable[[int, float], None] | None = None) -> dict[str, Any]:
        """Imitate the best heuristic, or the policy's own best sample, from the pre-trained weights;
        the warm start still names the policy.

        `train` calls this only while `fine_tuner` left an imitation pending: the
        heuristic was asked for and beat the policy's start (``imitated``), or
        the start is a sample rather than the greedy placement (``imitated_start``).
        A run interrupted before it ends runs it again on resume.
        """
        start = {k: v for k, v in self.state.warm_start.items() if k != PENDING_IMITATION}
        if self.state.warm_start.get(PENDING_IMITATION) == "heuristic":
            extra = {"imitated": super().warm_start(should_stop, on_imitation)}
        else:
            t0 = time.perf_counter()
            steps, per_group = self.imitate(np.asarray(self.state.best.group_devices), should_stop, on_imitation)
            extra = {"imitated_start": {"imitation_steps": steps, "imitation_probability": per_group,
                                        "seconds": time.perf_counter() - t0}}
        self.state.warm_start = {**start, "method": WARM_START_METHOD, **extra}
        return self.state.warm_start

    def best_placement(self) -> Placement:
        """The best placement seen; ``meta.policy.fine_tuned`` says whether training found it (a run whose best
        is still its step-0 start said true once any step had run, though the untrained policy, or the imitated
        heuristic, had placed it); ``meta.placed_by`` names the heuristic when its placement is the best."""
        placement = super().best_placement()
        start, best = self.state.warm_start, self.state.returned
        placement.meta["policy"] = {**placement.meta.get("policy", {}), **start.get("policy", {}),
                                    "fine_tuned": best.step > 0}
        imitated = start.get("imitated")
        if best.source.startswith(HEURISTIC):  # the heuristic itself, or its projection, beat the start
            placement.meta["placed_by"] = f"heuristic {best.source[len(HEURISTIC):]}"
        elif best.step == 0 and not best.source and imitated and best.step_time != start.get("start_step_time"):
            placement.meta["placed_by"] = f"heuristic {imitated['heuristic']}"  # (a run saved before sources)
        if best is self.state.floor and best.source in (ZERO_SHOT, "") and "answer_groups" in start:
            # the answer itself, placed on its own (coarser) groups
            placement.meta["groups"] = placement.meta["policy"]["groups"] = start["answer_groups"]
        return placement


def fine_tune_config(policy: SavedPolicy, config: TrainConfig | None = None, heuristic: bool = False) -> TrainConfig:
    """`config` (or the defaults) with the policy's sizes, and the heuristic warm start only if asked for."""
    return replace(config or TrainConfig(), groups=policy.groups, hidden=policy.hidden, load_aware=policy.load_aware,
                   kind_groups=policy.kind_groups, balanced_groups=policy.balanced_groups,
                   critical_groups=policy.critical_groups, warm_start="heuristic" if heuristic else "none")


def fine_tuner(graph: OpGraph, cluster: Cluster, policy: SavedPolicy, config: TrainConfig | None = None, *,
               heuristic: bool = False, reference: tuple[str, np.ndarray, float] | None = None,
               samples: int | None = None, groups: int | None = None,
               scorer: Callable[[Simulator], Scorer] | None = None,
               heuristic_limit: float | None = None, steer: bool = False) -> FineTuner:
    """A trainer for `graph` on `cluster` starting from `policy`, its zero-shot placement already scored.

    Parameters
    ----------
    graph, cluster : what to place, and where.
    policy : the pre-trained policy (`placer.rl.saved_policy.load_policy`).
    config : other hyperparameters (learning rate, samples, seed...); sizes come from the policy.
    heuristic : imitate the best heuristic first (in `train`, within its budget)
        where it is faster than the policy's start.
    reference : the best heuristic's ``(name, device per op, step time)`` if the caller has it.
    samples : K of the zero-shot start (0: the greedy placement alone; default `default_samples` of the
        graph's ops).
    groups : G, the most groups (default: the policy's own, or its pool member's); `config`'s ``groups``
        is not read, since it always holds a value (the from-scratch default).
    scorer : what scores the steps' samples (`Trainer`'s); the start is scored by the simulator, as the
        service's zero-shot answer is.
    heuristic_limit : the most the heuristics may take together, without `reference` (`Trainer`'s).
    steer : start from the zero-shot answer steered op by op (`placer.rl.steering`), as ``placer place
        --steer`` answers: it is the run's floor, and its projection onto the groups the start.
    """
    t0 = time.perf_counter()
    seed = (config or TrainConfig()).seed
    samples = default_samples(len(graph)) if samples is None else samples
    policy, samples, seed, answer = pool_member(graph, cluster, policy, samples, seed, groups, steer)
    # a member pooled at fewer groups than it learned on, fine-tuned on its own; or an answer placed on one
    # machine of several, which the member's samples on the whole cluster would not give again: the run starts
    # from the answer itself (`start_from_answer`)
    coarse = answer is not None and groups is None and policy.groups < policy.trained_groups
    if coarse:
        policy = policy.at_groups(policy.trained_groups)
    from_answer = coarse or (answer is not None and ("machine" in answer.meta or _steered(answer)))
    trainer = FineTuner(graph, cluster, fine_tune_config(policy, config, heuristic), reference=reference,
                        scorer=scorer, heuristic_limit=heuristic_limit)
    assign_to(trainer.policy, policy)
    start = (start_from_answer(trainer, policy, answer, samples) if from_answer
             else start_from_policy(trainer, policy, samples, seed))
    start["temperature"] = exploring_temperature(trainer, policy)
    heuristic_faster = trainer.config.warm_start == "heuristic" and (start["start_oom"]
                                                                     or trainer.reference[2] < start["start_step_time"])
    if heuristic_faster or start["start"] != "greedy":  # `train` imitates it first (`FineTuner.warm_start`)
        trainer.state.warm_start[PENDING_IMITATION] = "heuristic" if heuristic_faster else "start"
        trainer.setup_seconds = 0.0  # counted below, not again by `train`
    # setup (grouping, features, tracing, the zero-shot start) counts toward the run's budget, as a
    # heuristic warm start's does in `placer.rl.trainer.train`
    trainer.state.elapsed_seconds += time.perf_counter() - t0
    return trainer


def pool_member(graph: OpGraph, cluster: Cluster, policy: SavedPolicy, samples: int, seed: int,
                groups: int | None = None, steer: bool = False) -> tuple[SavedPolicy, int, int, Placement | None]:
    """``(policy, samples, seed, answer)`` to fine-tune from: with pooled policies, the member whose zero-shot
    placement is the pool's answer, with the K and seed of the candidates that answer is one of (so the
    fine-tune starts from that answer), and the answer; otherwise the policy itself and no answer, but on a
    cluster where the answer is placed on one machine of several (`placer.rl.zero_shot.on_one_machine`),
    which the policy's samples on the whole cluster would not give again, the answer too, and so with
    `steer` (the answer steered op by op, `placer.rl.steering`). With
    `groups`, every member places at that G (as `placer.rl.zero_shot.place_zero_shot` does) and the one
    returned is set to it."""
    # `placer train --init P --groups G` (and a service job with init and groups) kept the policy's G
    # silently, and its resume with the same flags was then refused for another G
    from placer.rl.zero_shot import on_one_machine, place_zero_shot

    if not policy.pooled and not on_one_machine(cluster, policy) and not steer:
        return (policy.at_groups(groups) if groups else policy), samples, seed, None
    answer = place_zero_shot(graph, cluster, policy, samples=samples, seed=seed, groups=groups, steer=steer)
    member, meta = policy.members[answer.meta.get("pool_member", 0)], answer.meta
    return (member.at_groups(groups) if groups else member), meta["member_samples"], meta["member_seed"], answer


def exploring_temperature(trainer: Trainer, policy: SavedPolicy, target: float = IMITATION_TARGET,
                          highest: float = 100.0) -> float:
    """The softmax temperature at which `policy`'s greedy placement has per-group probability `target`
    (1 if below it at 1).

    Found by bisection on the log-temperature; the greedy placement is the
    same at every temperature. Decoded by the NumPy forward pass, as the zero-shot start is: the
    trainer holds the same weights, and its compiled greedy and teacher-forced passes, used nowhere
    else, cost seconds of compiling each.
    """
    from placer.rl.features import device_features
    from placer.rl.numpy_policy import decode

    groups, devices = trainer.group_feats.numpy(), device_features(trainer.cluster)
    greedy, _ = decode(policy.weights, groups, devices, context=trainer.context)
    G = trainer.grouping.num_groups

    def per_group(t: float) -> float:
        _, log_prob = decode(policy.weights, groups, devices, actions=greedy, temperature=t, context=trainer.context)
        return float(np.exp(log_prob[0] / G))

    lo, hi = 0.0, math.log(highest)
    if per_group(1.0) <= target:
        t = 1.0
    elif per_group(highest) >= target:
        t = highest
    else:
        for _ in range(20):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if per_group(math.exp(mid)) > target else (lo, mid)
        t = math.exp(hi)
    trainer.state.warm_start["temperature"] = t
    return t


def start_from_policy(trainer: Trainer, policy: SavedPolicy, samples: int | None = None,
                      seed: int | None = None) -> dict[str, Any]:
    """Score the policy's zero-shot placement, make it the best so far, and mark the warm start done.

    The candidates of `placer.rl.zero_shot.place_zero_shot` (greedy and
    `samples` seeded by `seed`, by default the run's seed; default `default_samples` of the graph's ops),
    scored in one batch; the fastest that fits wins.
    """
    from placer.rl.features import device_features

    samples = default_samples(len(trainer.graph)) if samples is None else samples
    candidates = candidate_placements(policy, trainer.group_feats.numpy(), device_features(trainer.cluster), samples,
                                      trainer.config.seed if seed is None else seed, trainer.context)
    step_time, oom, _ = trainer.score(candidates, simulated=True)
    k = fastest(step_time, oom)
    trainer.state.best = Best(float(step_time[k]), bool(oom[k]), candidates[k].tolist(), 0, 0.0, source=ZERO_SHOT)
    trainer.state.warm_start = {"method": WARM_START_METHOD, "policy": {**policy.describe(), "fine_tuned": False},
                                "greedy_step_time": float(step_time[0]), "greedy_oom": bool(oom[0]),
                                "samples": int(samples), "start_step_time": float(step_time[k]),
                                "start_oom": bool(oom[k]), "start": "greedy" if k == 0 else f"sample {k - 1}"}
    return trainer.state.warm_start


def start_from_answer(trainer: Trainer, policy: SavedPolicy, answer: Placement, samples: int) -> dict[str, Any]:
    """Make a pool's answer the run's floor, and its projection onto the trainer's groups its start.

    For a member pooled at fewer groups than it was trained on (the shipped pool's 64 of 128), which
    often gives the answer: REINFORCE on those coarse groups stalled short of per-graph RL where the
    member's own groups went on (docs/pretrained-policy.md, "Measured"). So the trainer has the
    member's trained groups, the policy first imitates the answer projected onto them (the device holding
    most of each group's compute), and REINFORCE's best starts there; the answer itself, op by op, is the
    run's floor (`placer.rl.state.TrainerState.floor`, unless the best heuristic is faster), so it never
    returns worse than the answer it began from.
    """
    ops = answer.assignment(trainer.graph, trainer.cluster)
    projected = trainer.grouping.project(ops, len(trainer.cluster), weights=trainer.times.min(axis=1))
    step_time, oom, _ = trainer.score_ops(np.stack([ops, trainer.grouping.expand(projected)]), simulated=True)
    trainer.state.offer_floor(Best(float(step_time[0]), bool(oom[0]), projected.tolist(), 0, 0.0,
                                   op_devices=ops.tolist(), source=ZERO_SHOT))
    trainer.state.best = Best(float(step_time[1]), bool(oom[1]), projected.tolist(), 0, 0.0, source=ZERO_SHOT)
    trainer.state.warm_start = {
        "method": WARM_START_METHOD, "policy": {**policy.describe(), "fine_tuned": False}, "samples": int(samples),
        "start_step_time": float(step_time[0]), "start_oom": bool(oom[0]),
        "start": f"the pool's answer ({answer.meta['chosen']} on {answer.meta['groups']} groups"
                 + (f", steered op by op ({answer.meta['steered']['chosen']})" if _steered(answer) else "")
                 + "), projected",
        "projected_step_time": float(step_time[1]), "projected_oom": bool(oom[1]),
        "answer_groups": int(answer.meta["groups"])}
    return trainer.state.warm_start


def _steered(answer: Placement) -> bool:
    """Whether a steered schedule (`placer.rl.steering`), not the policy's own placement, is the answer."""
    return (answer.meta.get("steered") or {}).get("chosen") is not None


def can_place(policy: SavedPolicy, cluster: Cluster) -> bool:
    """Whether every member of `policy` addresses as many devices as `cluster` has (else a run trains from
    scratch)."""
    from placer.rl.policy import MAX_DEVICES

    return len(cluster) <= MAX_DEVICES and all(len(cluster) <= m.weights["dev_slot"].shape[0]
                                               for m in policy.members)
