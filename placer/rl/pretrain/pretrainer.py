"""The pre-trainer: one policy and one optimizer stepping through many environments.

Each step takes one environment (a seeded shuffle per epoch) and either
imitates its best placement so far (the teacher at first), or takes a
REINFORCE step there (`placer.rl.reinforce`: one EMA baseline per
environment, its best placement replayed among the K samples). The greedy
policy is evaluated on the training and validation environments
(`Pretrainer.evaluate_greedy`), which chooses what is exported.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from placer.errors import PlacerError
from placer.rl import reinforce
from placer.rl.config import PretrainConfig
from placer.rl.features import NUM_DEVICE_FEATURES, NUM_GROUP_FEATURES, DecodeContext
from placer.rl.numpy_policy import decode as numpy_decode
from placer.rl.policy import reinforce_update
from placer.rl.pretrain.environment import Environment
from placer.rl.saved_policy import assign_to, weights_of
from placer.rl.worlds import robust_rewards


@dataclass
class EnvState:
    baseline: float | None = None
    best_step_time: float = math.inf
    best_oom: bool = True
    best_devices: list[int] = field(default_factory=list)


@dataclass
class PretrainState:
    step: int = 0
    imitation_steps: int = 0
    samples: int = 0
    elapsed_seconds: float = 0.0
    envs: dict[str, EnvState] = field(default_factory=dict)
    evals: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "PretrainState":
        d = dict(d)
        d["envs"] = {k: EnvState(**v) for k, v in d.get("envs", {}).items()}
        return cls(**d)


class Pretrainer:
    """One policy, one optimizer, many environments.

    Parameters
    ----------
    envs : the training environments.
    config : hyperparameters.
    validation : environments never trained on that choose the exported checkpoint.
    """

    def __init__(self, envs: list[Environment], config: PretrainConfig | None = None,
                 validation: list[Environment] | None = None):
        import tensorflow as tf

        from placer.rl.optimizer import Adam
        from placer.rl.policy import PlacementPolicy, PolicyConfig

        if not envs:
            raise PlacerError("pre-training needs at least one environment")
        self.config = (config or PretrainConfig()).check()
        self.envs = envs
        self.validation = list(validation or [])
        self.exported: dict[str, Any] = {}
        """Step and validation ratio of the weights in ``DIR/policy`` (`restore` reads them back from its card)."""
        self.init: dict[str, str] | None = None
        """Name and version of the policy the weights started from (`start_from`); None from random weights."""
        self.policy = PlacementPolicy(PolicyConfig(NUM_GROUP_FEATURES, NUM_DEVICE_FEATURES, hidden=self.config.hidden,
                                                   attention=self.config.hidden, load_aware=self.config.load_aware),
                                      seed=self.config.seed)
        self.optimizer = Adam(self.policy.trainable_variables, self.config.learning_rate)
        self.state = PretrainState(envs={e.key: EnvState() for e in envs})
        self._consts = {e.key: (tf.constant(e.group_feats), tf.constant(e.device_feats),
                                DecodeContext(*(tf.constant(c) for c in e.context))) for e in envs}
        for e in envs:
            self._offer_best(e, e.teacher_devices[None, :], np.array([e.teacher_step_time]), np.array([False]))
        self._build_functions()

    def _build_functions(self) -> None:
        import tensorflow as tf

        policy, opt, K = self.policy, self.optimizer, self.config.samples
        clip = float(self.config.clip_norm)
        sig_g = tf.TensorSpec([None, NUM_GROUP_FEATURES], tf.float32)
        sig_d = tf.TensorSpec([None, NUM_DEVICE_FEATURES], tf.float32)
        sig_a = tf.TensorSpec([None, None], tf.int32)
        sig_k = tf.TensorSpec([None], tf.float32)
        scalar = tf.TensorSpec([], tf.float32)
        vector = tf.TensorSpec([None], tf.float32)
        matrix = tf.TensorSpec([None, None], tf.float32)
        sig_c = DecodeContext(matrix, vector, vector, vector, matrix, matrix, matrix, matrix, matrix)

        # one trace serves every graph and cluster (shapes left open; plain graph mode, no XLA: XLA would
        # compile again for every new number of groups or devices)
        @tf.function(input_signature=[sig_g, sig_d, sig_c, tf.TensorSpec([2], tf.int32)])
        def sample(groups, devices, context, seed):
            return policy.decode(groups, devices, K, seed, context=context)

        @tf.function(input_signature=[sig_g, sig_d, sig_c, sig_a, sig_k, scalar])
        def update(groups, devices, context, actions, advantage, entropy_weight):
            loss, norm, d = reinforce_update(policy, opt, clip, groups, devices, actions, tf.shape(actions)[0],
                                             advantage, entropy_weight, context=context)
            return loss, norm, d.log_prob, d.entropy

        self._sample, self._update = sample, update

    # -- steps ------------------------------------------------------------------------------
    def env_for(self, step: int) -> Environment:
        """The environment of a step: a seeded shuffle of all of them per epoch (resumes draw the same)."""
        n = len(self.envs)
        order = np.random.default_rng([self.config.seed, step // n]).permutation(n)
        return self.envs[order[step % n]]

    def _offer_best(self, env: Environment, devices: np.ndarray, step_time: np.ndarray, oom: np.ndarray) -> None:
        s = self.state.envs[env.key]
        k = reinforce.best_sample(step_time, oom)
        if reinforce.better(float(step_time[k]), bool(oom[k]), s.best_step_time, s.best_oom):
            s.best_step_time, s.best_oom, s.best_devices = float(step_time[k]), bool(oom[k]), devices[k].tolist()

    def imitation_step(self) -> dict[str, Any]:
        """One supervised step toward an environment's best placement so far (the teacher at first)."""
        import tensorflow as tf

        s = self.state
        env = self.env_for(s.step)
        target = np.asarray(s.envs[env.key].best_devices, np.int32)[None, :]
        g, d, c = self._consts[env.key]
        loss, norm, logp, ent = self._update(g, d, c, tf.constant(target), tf.constant([1.0]), tf.constant(0.0))
        s.step += 1
        s.imitation_steps += 1
        return {"step": s.step, "phase": "imitation", "env": env.key, "loss": float(loss), "grad_norm": float(norm),
                "mean_step_time_ratio": math.nan, "min_step_time_ratio": math.nan, "oom_fraction": math.nan,
                "entropy": float(ent.numpy().mean())}

    def reinforce_rollout(self) -> tuple:
        """The next REINFORCE step's samples, drawn and simulated: the long part of a step, which changes
        nothing (an interrupt here leaves the run as the previous step left it)."""
        import tensorflow as tf

        s, cfg = self.state, self.config
        env = self.env_for(s.step)
        g, d, c = self._consts[env.key]
        dec = self._sample(g, d, c, tf.constant([cfg.seed, s.step], tf.int32))
        actions = dec.actions.numpy().astype(np.int64)
        actions[-1] = s.envs[env.key].best_devices  # replay the best so far
        step_time, oom, reward = env.score(actions, cfg.oom_penalty)
        reward = robust_rewards(reward, env.sim, env.grouping, actions, cfg.oom_penalty, cfg.seed, s.step,
                                cfg.world_sigma)  # with world_sigma: half from a drawn world
        return env, actions, dec.entropy.numpy(), step_time, oom, reward

    def reinforce_learn(self, rollout: tuple) -> dict[str, Any]:
        """The gradient step on `reinforce_rollout`'s samples and the state's account of it (`run` runs it
        `placer.errors.uninterruptible`, so that a checkpoint's weights and step count agree)."""
        import tensorflow as tf

        s, cfg = self.state, self.config
        env, actions, entropy, step_time, oom, reward = rollout
        es = s.envs[env.key]
        g, d, c = self._consts[env.key]
        baseline = reinforce.baseline_now(es.baseline, reward)
        advantage = reinforce.advantages(reward, baseline)
        loss, norm, _, _ = self._update(g, d, c, tf.constant(actions, tf.int32), tf.constant(advantage),
                                        tf.constant(float(cfg.entropy_weight)))
        es.baseline = reinforce.next_baseline(baseline, reward, cfg.baseline_decay)
        self._offer_best(env, actions, step_time, oom)
        s.step += 1
        s.samples += len(actions)
        ratio = step_time / env.teacher_step_time
        return {"step": s.step, "phase": "reinforce", "env": env.key, "loss": float(loss), "grad_norm": float(norm),
                "mean_step_time_ratio": float(ratio.mean()), "min_step_time_ratio": float(ratio.min()),
                "oom_fraction": float(oom.mean()), "entropy": float(entropy.mean())}

    def set_learning_rate(self, lr: float) -> None:
        self.optimizer.learning_rate.assign(lr)

    # -- evaluation and export --------------------------------------------------------------
    def _greedy_ratios(self, envs: list[Environment], weights) -> dict[str, float]:
        ratios = {}
        for env in envs:
            acts, _ = numpy_decode(weights, env.group_feats, env.device_feats, 1, greedy=True, context=env.context)
            step_time, oom, _ = env.score(acts, self.config.oom_penalty)
            ratios[env.key] = float(step_time[0] / env.teacher_step_time) if not oom[0] else math.inf
        return ratios

    def evaluate_greedy(self) -> dict[str, Any]:
        """Greedy zero-shot step time over teacher step time, per environment and geometric mean.

        On the validation environments an out-of-memory placement counts as infinitely slow, so a
        checkpoint that runs out of memory on an unseen graph is never exported over one that fits.
        """
        weights = weights_of(self.policy)
        ratios = self._greedy_ratios(self.envs, weights)
        finite = [r for r in ratios.values() if math.isfinite(r)]
        result = {"step": self.state.step, "elapsed_seconds": self.state.elapsed_seconds,
                  "geomean_ratio": float(np.exp(np.mean(np.log(finite)))) if finite else math.inf,
                  "oom": sum(not math.isfinite(r) for r in ratios.values()), "ratios": ratios}
        if self.validation:
            val = self._greedy_ratios(self.validation, weights)
            result["validation_ratios"] = val
            result["validation_geomean_ratio"] = float(np.exp(np.mean(np.log(list(val.values())))))
        return result

    def card(self, name: str, version: str) -> dict[str, Any]:
        """The policy card describing this run."""
        return {
            "name": name, "version": version, "fine_tuned": False, "hidden": self.config.hidden,
            "load_aware": self.config.load_aware, "kind_groups": self.config.kind_groups,
            "balanced_groups": self.config.balanced_groups, "critical_groups": self.config.critical_groups,
            "groups": self.config.groups,
            "trained_on": {
                "graphs": sorted({e.graph.name for e in self.envs}),
                "clusters": sorted({e.cluster.name for e in self.envs}),
                "steps": self.state.step, "imitation_steps": self.state.imitation_steps,
                "samples": self.state.samples, "seconds": round(self.state.elapsed_seconds, 1),
                "teachers": list(self.config.teachers),
            },
            "validation": ({"graphs": sorted({e.graph.name for e in self.validation}), "step": self.state.step,
                            "greedy_geomean_ratio_to_teacher": self.state.evals[-1].get("validation_geomean_ratio")}
                           if self.validation and self.state.evals else None),
            "config": asdict(self.config),
            "init": self.init,
        }


def start_from(p: Pretrainer, saved) -> None:
    """Start `p` from a saved policy's weights instead of random ones: pre-training continued, e.g. more
    REINFORCE for a policy that has already imitated its teachers (`placer pretrain --init`).

    Raises
    ------
    PlacerError
        If the policy was trained with other sizes (``hidden``).
    """
    assign_to(p.policy, saved)
    p.init = {"name": saved.name, "version": saved.version}
