"""REINFORCE training of the placement policy against the simulator.

One step: decode K placements in one batched pass, expand them from groups to
ops, score all K in one call of the simulator, turn step times into rewards
and advantages (`placer.rl.reinforce`), and take one policy-gradient step:

    loss       -mean_k(A_k * log p(placement_k)) - entropy_weight * mean_k(entropy_k)

with Adam and global-norm gradient clipping.

Improvements on the paper, each optional: the best placement seen so far
replayed as one of the K samples of every step (``replay_best``; a form of
self-imitation learning, Oh et al. 2018), a warm start that first imitates
the best heuristic's placement (``warm_start="heuristic"``; the paper's cold
start is ``"none"``), and advantages normalised by the batch's spread.

With ``objective="throughput"`` the same loop minimises the pipelined max
device load instead (`placer.objectives.ThroughputModel`: step_time_k above
becomes max_load_k, the lower bound its own, OOM the weights not fitting);
the warm start and the best placement follow the objective.

Whatever the budget, a run answers no worse than the placements it was
given before its first step (the best heuristic, a fine-tune's zero-shot
answer): they are its floor (`TrainerState.floor`, `placer.rl.starts`).
The warm start's imitation takes at most ``imitation_fraction`` of the budget,
and the entropy bonus grows while the policy's entropy is under
``entropy_floor`` (`placer.rl.reinforce.next_entropy_scale`).

Sampling is seeded by ``(seed, step)`` with stateless ops, so a run is
reproducible and a resumed run draws the same samples as an uninterrupted one.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, replace
from typing import Any, Callable, Protocol

import numpy as np

from placer.cluster import Cluster
from placer.errors import PlacerError, uninterruptible
from placer.graph import OpGraph
from placer.grouping import Grouping, group_graph_fitting
from placer.objectives import ThroughputModel
from placer.placement import Placement
from placer.rl import reinforce
from placer.rl.config import TrainConfig
from placer.rl.features import (NUM_DEVICE_FEATURES, NUM_GROUP_FEATURES, DecodeContext, decode_context,
                                 device_features, group_features)
from placer.rl.policy import MAX_DEVICES, PolicyConfig, reinforce_update
from placer.rl.state import Best, Rollout, StepStats, TrainerState, config_from_saved  # noqa: F401 (their home before)
from placer.rl.starts import (TRAINED, heuristic_source, kept, ranked_heuristics, searched_reference,
                               throughput_cost)
from placer.rl.worlds import robust_rewards
from placer.simulator import Simulator

JIT_MIN_GROUPS = 64
"""Below this many groups the decoder loop is short and XLA's compile time does not pay off."""
IMITATION_LR_FACTOR = 5.0
"""The warm start's supervised steps take bigger Adam steps than REINFORCE."""
IMITATION_TARGET = 0.9
"""The warm start stops once the target's mean per-group probability passes this."""
PENDING_IMITATION = "pending_imitation"
"""Warm-start key of an imitation still to run (`train` runs it); a fine-tune's start sets it
(`placer.rl.finetune`)."""


class Scorer(Protocol):
    """What scores a step's samples: ``run_batch(assignments [K, num_ops])`` as `Simulator.run_batch` answers
    (the simulator itself, `placer.measure.reward.MeasuredSimulator` or `placer.measure.distributed.RaySimulator`)."""

    def run_batch(self, assignments: np.ndarray): ...


class Trainer:
    """Trains a placement policy for one graph on one cluster.

    Parameters
    ----------
    graph, cluster : what to place, and where.
    config : hyperparameters.
    reference : ``(name, device per op, step time)`` of the best heuristic placement, when the caller
        already has it; by default every registered heuristic runs and the fastest is taken. It is the
        run's floor (`TrainerState.floor`), and the placement a heuristic warm start imitates.
    scorer : makes, from the trainer's simulator, what scores the samples of each step and the warm
        start's placement (`Scorer`; ``placer train --reward measured``, ``--ray``); by default the
        simulator itself. Bounds, memory, the heuristics and the returned placement are the simulator's.
    heuristic_limit : the most the heuristics may take together when `reference` is not given (a share of
        the run's budget, `placer.rl.starts.heuristic_limit_of`); None: each keeps its own time cap.

    Raises
    ------
    PlacerError
        On a bad config, or a cluster with more than `MAX_DEVICES` devices.
    """

    def __init__(self, graph: OpGraph, cluster: Cluster, config: TrainConfig | None = None, *,
                 reference: tuple[str, np.ndarray, float] | None = None,
                 scorer: Callable[[Simulator], Scorer] | None = None, heuristic_limit: float | None = None):
        import tensorflow as tf

        from placer.rl.optimizer import Adam
        from placer.rl.policy import PlacementPolicy

        self.config = (config or TrainConfig()).check()
        if len(cluster) > MAX_DEVICES:
            raise PlacerError(f"cluster {cluster.name!r} has {len(cluster)} devices; the policy handles at most "
                              f"{MAX_DEVICES}")
        self.graph, self.cluster = graph, cluster
        self.sim = Simulator(graph, cluster)
        self.scorer: Scorer = self.sim if scorer is None else scorer(self.sim)
        self.times = self.sim.times
        self.throughput = ThroughputModel(graph, cluster, self.times) if self.config.objective == "throughput" else None
        self.throughput_bound = self.throughput.lower_bound() if self.throughput is not None else None
        t0 = time.perf_counter()
        imitating = self.config.warm_start == "heuristic"
        if reference is None:
            reference = self._best_heuristic(heuristic_limit)
            if imitating and self.config.warm_start_search > 0:
                reference = searched_reference(graph, cluster, reference, self.config.warm_start_search)
        self.reference: tuple[str, np.ndarray, float] = reference
        self.heuristic_seconds = time.perf_counter() - t0
        # more groups than G where the graph's tensors are too big for so few (the run reports how many)
        self.grouping: Grouping = group_graph_fitting(graph, cluster, self.config.groups, self.times,
                                                      respect=self.reference[1] if imitating else None,
                                                      split_kinds=self.config.kind_groups,
                                                      balanced=self.config.balanced_groups,
                                                      split_critical=self.config.critical_groups)
        self.group_feats = tf.constant(group_features(graph, cluster, self.grouping, self.times))
        self.device_feats = tf.constant(device_features(cluster))
        self.context = (decode_context(graph, cluster, self.grouping, self.times) if self.config.load_aware
                        else None)
        """The groups' `placer.rl.features.DecodeContext` (arrays) when the policy is load-aware."""
        self.policy = PlacementPolicy(
            PolicyConfig(NUM_GROUP_FEATURES, NUM_DEVICE_FEATURES, hidden=self.config.hidden,
                         attention=self.config.hidden, load_aware=self.config.load_aware),
            seed=self.config.seed,
        )
        self.optimizer = Adam(self.policy.trainable_variables, self.config.learning_rate)
        self.state = TrainerState()
        self._offer_heuristic()
        self.setup_seconds = time.perf_counter() - t0
        """Heuristics, grouping and features: part of a fresh run's time, not of a resumed one's."""
        self._build_functions()

    def _offer_heuristic(self) -> None:
        """The best heuristic's placement, scored in the simulator on the run's objective, as the floor."""
        name, ops, _ = self.reference
        ops = np.asarray(ops, dtype=np.int64)
        step_time, oom, _ = self.score_ops(ops[None, :], simulated=True)
        projected = self.grouping.project(ops, len(self.cluster), weights=self.times.min(axis=1))
        self.state.offer_floor(Best(float(step_time[0]), bool(oom[0]), projected.tolist(), 0, 0.0,
                                    op_devices=ops.tolist(), source=heuristic_source(name)))

    # -- compiled passes -----------------------------------------------------
    def _build_functions(self) -> None:
        import tensorflow as tf

        policy, opt, K = self.policy, self.optimizer, self.config.samples
        clip = float(self.config.clip_norm)
        jit = self.grouping.num_groups >= JIT_MIN_GROUPS if self.config.jit is None else bool(self.config.jit)
        ctx = None if self.context is None else DecodeContext(*(tf.constant(c) for c in self.context))

        @tf.function(jit_compile=jit)
        def sample(groups, devices, seed, temperature):
            return policy.decode(groups, devices, K, seed, temperature=temperature, context=ctx)

        @tf.function(jit_compile=jit)
        def greedy(groups, devices):
            return policy.decode(groups, devices, 1, tf.zeros([2], tf.int32), greedy=True, context=ctx)

        @tf.function(jit_compile=jit)
        def update(groups, devices, actions, advantage, entropy_weight, temperature):
            loss, norm, d = reinforce_update(policy, opt, clip, groups, devices, actions, K, advantage, entropy_weight,
                                             temperature, ctx)
            return loss, norm, d.log_prob

        @tf.function(jit_compile=jit)
        def log_prob(groups, devices, actions, temperature):
            return policy.decode(groups, devices, K, tf.zeros([2], tf.int32), actions=actions,
                                 temperature=temperature, context=ctx).log_prob

        self._sample, self._greedy, self._update, self._log_prob = sample, greedy, update, log_prob

    @property
    def temperature(self) -> float:
        """Of the policy's softmax while sampling and training: 1 here (a fine-tune may flatten it)."""
        return 1.0

    def sample(self, step: int):
        """K placements of groups ``[K, G]`` and their entropies, drawn with seed ``(seed, step)``."""
        import tensorflow as tf

        d = self._sample(self.group_feats, self.device_feats, tf.constant([self.config.seed, step], tf.int32),
                         tf.constant(self.temperature, tf.float32))
        return d.actions.numpy().astype(np.int64), d.entropy.numpy()

    def greedy(self) -> np.ndarray:
        """The most likely placement of groups ``[G]``."""
        return self._greedy(self.group_feats, self.device_feats).actions.numpy()[0].astype(np.int64)

    def log_prob(self, actions: np.ndarray) -> np.ndarray:
        """Log-probability ``[K]`` of K placements of groups ``[K, G]`` under the current policy."""
        import tensorflow as tf

        return self._log_prob(self.group_feats, self.device_feats, tf.constant(actions, tf.int32),
                              tf.constant(self.temperature, tf.float32)).numpy()

    def update(self, actions: np.ndarray, advantage: np.ndarray, entropy_weight: float | None = None):
        """One gradient step on ``-mean(advantage * log p(actions)) - entropy_weight * entropy``.

        Returns ``(loss, grad_norm, log_prob [K])``, log-probabilities before the step.
        """
        import tensorflow as tf

        ew = self.config.entropy_weight if entropy_weight is None else entropy_weight
        loss, norm, logp = self._update(self.group_feats, self.device_feats, tf.constant(actions, tf.int32),
                                        tf.constant(advantage, tf.float32), tf.constant(ew, tf.float32),
                                        tf.constant(self.temperature, tf.float32))
        return float(loss), float(norm), logp.numpy()

    # -- rewards -------------------------------------------------------------
    def score(self, group_devices: np.ndarray, *, simulated: bool = False):
        """Score placements of groups ``[K, G]`` with the scorer (the simulator when `simulated`):
        ``(step_time [K], oom [K], reward [K])``.

        With the throughput objective the first array holds max loads.
        """
        return self.score_ops(self.grouping.expand(group_devices), simulated=simulated)

    def score_ops(self, op_devices: np.ndarray, *, simulated: bool = False):
        """`score` for placements of ops ``[K, num_ops]``."""
        if self.throughput is not None:
            return self._score_throughput(op_devices)
        res = (self.sim if simulated else self.scorer).run_batch(op_devices)
        return res.step_time, res.oom, reinforce.simulated_rewards(res, self.sim.memory_bytes, self.sim.lower_bound,
                                                                   self.config.oom_penalty)

    def _score_throughput(self, ops: np.ndarray):
        """Max load per placement; OOM when some device's weights exceed its memory."""
        cost, oom, overflow = throughput_cost(self.throughput, ops)
        return cost, oom, reinforce.rewards(cost, oom, overflow, self.throughput_bound, self.config.oom_penalty)

    def _track_best(self, group_devices: np.ndarray, step_time: np.ndarray, oom: np.ndarray, step: int,
                    elapsed: float, source: str = TRAINED, into: str = "best") -> None:
        """Make the best of these placements the state's `into` (``best`` or ``trained``) if it beats it."""
        k = reinforce.best_sample(step_time, oom)
        if getattr(self.state, into).better(float(step_time[k]), bool(oom[k])):
            setattr(self.state, into, Best(float(step_time[k]), bool(oom[k]), group_devices[k].tolist(), step,
                                           elapsed, source=source))

    # -- warm start ------------------------------------------------------------
    def warm_start(self, should_stop: Callable[[], bool] = lambda: False,
                   on_imitation: Callable[[int, float], None] | None = None) -> dict[str, Any]:
        """Imitate the best heuristic placement (projected onto groups), if the config asks for it.

        The heuristic was chosen before grouping, and the grouping keeps its
        device boundaries where it can, so the projection is usually exact.
        The projected placement is scored and counts as a sample at step 0,
        so the best placement is never worse than it. Returns what was done (also
        stored in the trainer state and the placement's meta). `on_imitation` is `imitate`'s.
        """
        t0 = time.perf_counter()
        if self.config.warm_start == "none":
            self.state.warm_start = {"method": "none"}
            return self.state.warm_start
        name, op_devices, heur_time = self.reference
        heuristic_seconds = self.heuristic_seconds
        target = self.grouping.project(op_devices, len(self.cluster), weights=self.times.min(axis=1))
        step_time, oom, _ = self.score(target[None, :])
        self._track_best(target[None, :], step_time, oom, 0, self.state.elapsed_seconds, heuristic_source(name))
        steps, per_group = self.imitate(target, should_stop, on_imitation)
        self.state.warm_start = {
            "method": "heuristic", "heuristic": name, "heuristic_step_time": heur_time,
            "projected_step_time": float(step_time[0]), "imitation_steps": steps,
            "imitation_probability": per_group, "heuristic_seconds": heuristic_seconds,
            "seconds": time.perf_counter() - t0,
        }
        return self.state.warm_start

    def imitate(self, target: np.ndarray, should_stop: Callable[[], bool] = lambda: False,
                on_imitation: Callable[[int, float], None] | None = None) -> tuple[int, float]:
        """Supervised steps toward one placement per group until its per-group probability passes
        `IMITATION_TARGET` (or ``imitation_steps`` are spent, or `should_stop` says so); returns the steps
        and that probability. `on_imitation(steps, probability)` is called after each step."""
        actions = np.tile(target, (self.config.samples, 1))
        ones = np.ones(self.config.samples, dtype=np.float32)
        steps, per_group = 0, -math.inf
        G = self.grouping.num_groups
        lr = self.optimizer.learning_rate.numpy()
        self.optimizer.learning_rate.assign(lr * IMITATION_LR_FACTOR)
        try:  # a second Ctrl-C raises in here, and the rate would be checkpointed on the way out
            while steps < self.config.imitation_steps and not should_stop():
                _, _, logp = self.update(actions, ones, entropy_weight=0.0)
                steps += 1
                per_group = float(np.exp(logp.mean() / G))
                if on_imitation is not None:
                    on_imitation(steps, per_group)
                if per_group > IMITATION_TARGET:
                    break
        finally:
            self.optimizer.learning_rate.assign(lr)
        return steps, per_group

    def _best_heuristic(self, seconds: float | None = None) -> tuple[str, np.ndarray, float]:
        """The registered heuristic (or single device) whose placement scores best without OOM; the heuristics
        take at most `seconds` together (`placer.rl.starts.heuristic_limit_of`)."""
        name, assignment, cost, _ = ranked_heuristics(self.graph, self.cluster, self.config.objective,
                                                      sim=self.sim, throughput=self.throughput, seconds=seconds)[0]
        return name, assignment, cost

    # -- REINFORCE ---------------------------------------------------------------
    def rollout(self) -> Rollout:
        """This step's K placements, drawn and simulated (the best so far replayed as the last one).

        The long part of a step, and it changes nothing: an interrupt here
        leaves the run as the previous step left it.
        """
        t0 = time.perf_counter()
        s = self.state
        actions, entropy = self.sample(s.step)
        replayed = bool(self.config.replay_best and s.best.group_devices)
        if replayed:
            actions[-1] = s.best.group_devices
        step_time, oom, reward = self.score(actions)
        reward = robust_rewards(reward, self.sim, self.grouping, actions, self.config.oom_penalty, self.config.seed,
                                s.step, self.config.world_sigma)  # with world_sigma: half from a drawn world
        return Rollout(actions, entropy, step_time, oom, reward, t0, replayed)

    def learn(self, r: Rollout) -> StepStats:
        """The policy-gradient step on the samples of `r` (from `rollout`), and the state's account of it
        (step, samples, baseline, best). `train` runs it `placer.errors.uninterruptible`, so that the
        weights and the step count a checkpoint saves describe the same step."""
        s = self.state
        baseline = reinforce.baseline_now(s.baseline, r.reward)
        entropy_weight = self.config.entropy_weight * s.entropy_scale
        loss, norm, _ = self.update(r.actions, reinforce.advantages(r.reward, baseline), entropy_weight)
        s.baseline = reinforce.next_baseline(baseline, r.reward, self.config.baseline_decay)
        entropy = float(r.entropy.mean())
        s.entropy_scale = reinforce.next_entropy_scale(s.entropy_scale, entropy,
                                                       self.config.entropy_floor * math.log(len(self.cluster)))
        dt = time.perf_counter() - r.started
        s.elapsed_seconds += dt
        self._track_best(r.actions, r.step_time, r.oom, s.step + 1, s.elapsed_seconds)
        sampled = len(r.actions) - r.replayed
        self._track_best(r.actions[:sampled], r.step_time[:sampled], r.oom[:sampled], s.step + 1,
                         s.elapsed_seconds, into="trained")
        s.step += 1
        s.samples += len(r.actions)
        return StepStats(
            step=s.step, elapsed_seconds=s.elapsed_seconds, samples=s.samples,
            mean_step_time=float(r.step_time.mean()), min_step_time=float(r.step_time.min()),
            best_step_time=s.returned.step_time, mean_reward=float(r.reward.mean()), baseline=s.baseline,
            entropy=entropy, entropy_weight=entropy_weight, oom_fraction=float(r.oom.mean()), loss=loss, grad_norm=norm,
            samples_per_second=len(r.actions) / dt,
        )

    # -- results -----------------------------------------------------------------
    def best_placement(self) -> Placement:
        """The best placement seen, scored by the simulator, with how it was found in ``meta``."""
        b = self.state.returned
        if not b.group_devices:
            raise PlacerError("training has not scored any placement yet")
        ops = np.asarray(b.op_devices) if b.op_devices else self.grouping.expand(np.asarray(b.group_devices))
        placement = Placement.from_assignment(self.graph, self.cluster, ops, "rl")
        placement.meta.update({
            "steps": self.state.step, "samples": self.state.samples,
            "train_seconds": self.state.elapsed_seconds, "found_at_step": b.step,
            "found_at_seconds": b.elapsed_seconds, "groups": self.grouping.num_groups,
            "warm_start": self.state.warm_start, "kept": kept(self),
            "policy": {"kind": "seq2seq bi-LSTM encoder + LSTM decoder with attention", "hidden": self.config.hidden,
                       "parameters": int(sum(int(np.prod(v.shape)) for v in self.policy.trainable_variables))},
            "config": asdict(self.config),
        })
        placement = self.sim.evaluate(placement)
        if self.throughput is not None:
            placement = replace(placement, objective="throughput", max_load=self.throughput.max_load(ops))
        return placement


def train(trainer: Trainer, *, budget_seconds: float | None = None, max_steps: int | None = None,
          on_step: Callable[[StepStats], None] | None = None,
          should_stop: Callable[[], bool] = lambda: False,
          on_imitation: Callable[[int, float, float, float | None], None] | None = None) -> str:
    """Run steps until the budget or step count is reached (both count the whole run, resumed or not).

    Set-up, warm start and compilation count against the budget; the warm
    start's imitation stops after ``imitation_fraction`` of the budget (or
    when the budget is spent), and at least one REINFORCE step is always
    taken. A warm start interrupted by `should_stop` is left to do again (a
    resumed run imitates from the weights it had reached).
    `on_imitation(steps, probability, seconds, limit)` is called after each
    imitation step (the target's per-group probability, the imitation's
    seconds so far and their limit, None without a budget), e.g. for progress.

    Each step's update and `on_step` run `placer.errors.uninterruptible`: a
    second Ctrl-C (`placer.cli.common.StopOnSignal`) landing there stops the
    run after the step, so that a checkpoint saved on the way out holds
    weights, optimizer and step count of the same step, and the caller has
    recorded that step.

    Returns why it stopped: ``"done"`` or ``"interrupted"`` (when `should_stop` said so).
    """
    if budget_seconds is None and max_steps is None:
        raise PlacerError("give a time budget or a number of steps")
    s = trainer.state
    if not s.warm_start or s.warm_start.get(PENDING_IMITATION):
        s.elapsed_seconds += trainer.setup_seconds
        t0 = time.perf_counter()

        limit = None if budget_seconds is None else trainer.config.imitation_fraction * budget_seconds

        def imitation_over() -> bool:
            spent = time.perf_counter() - t0
            return should_stop() or (limit is not None
                                     and (spent > limit or s.elapsed_seconds + spent > budget_seconds))

        def progress(steps: int, probability: float) -> None:
            if on_imitation is not None:
                on_imitation(steps, probability, time.perf_counter() - t0, limit)

        before = dict(s.warm_start)
        trainer.warm_start(imitation_over, progress)
        s.elapsed_seconds += time.perf_counter() - t0
        if should_stop():  # cut short by the caller, not by the budget: a resume imitates again
            s.warm_start = before
            return "interrupted"
    while True:
        if should_stop():
            return "interrupted"
        if max_steps is not None and s.step >= max_steps:
            return "done"
        if budget_seconds is not None and s.elapsed_seconds >= budget_seconds and s.step > 0:
            return "done"  # (a run always takes one REINFORCE step, however small its budget)
        rollout = trainer.rollout()  # the long part, which changes nothing: a second Ctrl-C stops it at once
        with uninterruptible():  # weights, state and the caller's record of the step (on_step) change together
            stats = trainer.learn(rollout)
            if on_step is not None:
                on_step(stats)
