"""Pre-training: one placement policy trained over a corpus of graphs and several clusters.

Each (graph, cluster) pair is an environment: its grouping, its size-free
features (`placer.rl.features`), a simulator, and a teacher placement (the
fastest of a few cheap heuristics, projected onto the groups). The one policy
sees every environment in turn, so nothing it learns can be tied to one
graph's size or one cluster's device count (devices are an input of the
policy, up to `placer.rl.policy.MAX_DEVICES`).

Two phases share the budget:

1. imitation (behaviour cloning, as GDP and Placeto warm-start): maximise the
   log-probability of each environment's teacher placement;
2. REINFORCE, as in `placer.rl.trainer`, but across environments: K samples
   per step from one environment, rewards and advantages as `placer.rl.reinforce`
   (the same scale on every graph), one EMA baseline per environment, and the
   environment's best placement so far replayed among the samples
   (self-imitation), the teacher being the first best.

Validation environments (graphs of families neither trained on nor held
out, the manifest's "validation" split) choose what is exported: the policy
in ``DIR/policy`` is the evaluated checkpoint whose greedy placements are
fastest on them, because zero-shot quality on unseen graphs swings by several
percent between checkpoints while the training graphs keep improving. With
no validation graphs, or ``export="last"``, the latest checkpoint is exported
(in three runs the last checkpoint placed the benchmark graphs better than the
validation-chosen one; README).

A run can start from a saved policy instead of random weights (`start_from`):
pre-training continued, typically REINFORCE alone (``imitation_fraction=0``).

Progress is a tqdm bar plus ``progress.json``; ``history.csv`` has one row per
step and ``curve.png`` the greedy policy's step time relative to the teacher
over time. A checkpoint (TF weights + Adam, and ``pretrain_state.json``) is
written every `CHECKPOINT_EVERY_SECONDS` and at the end, and the policy is
exported to ``DIR/policy`` (`placer.rl.saved_policy`), which is what
zero-shot placement and fine-tuning load. ``resume=True`` continues.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

from placer.cluster import Cluster
from placer.errors import PlacerError, uninterruptible
from placer.graph import OpGraph
from placer.fileio import read_json_file, write_atomic
from placer.placers import best
from placer.placers.refine import SEARCHED, descend
from placer.rl import reinforce
from placer.rl.config import PretrainConfig, default_of
from placer.rl.features import (NUM_DEVICE_FEATURES, NUM_GROUP_FEATURES, DecodeContext, decode_context,
                                 device_features, group_features)
from placer.grouping import Grouping, group_graph
from placer.rl.numpy_policy import decode as numpy_decode
from placer.rl.policy import MAX_DEVICES, reinforce_update
from placer.rl.run_folder import CURVE_FILE, HISTORY_FILE, Cadence, History, plot_pretraining_curve, write_progress
from placer.rl.saved_policy import assign_to, load_policy, save_policy, weights_of
from placer.simulator import Simulator

STATE_FILE = "pretrain_state.json"
TEACHERS_FILE = "teachers.json"
CHECKPOINT_DIR = "checkpoint"
POLICY_DIR = "policy"
CHECKPOINT_EVERY_SECONDS = 60.0
EVAL_EVERY_SECONDS = 60.0
DEFAULT_TEACHERS = default_of(PretrainConfig, "teachers")


@dataclass
class Environment:
    """One (graph, cluster) pair the policy trains on."""

    key: str
    graph: OpGraph
    cluster: Cluster
    sim: Simulator
    grouping: Grouping
    group_feats: np.ndarray
    device_feats: np.ndarray
    teacher: str
    teacher_devices: np.ndarray  # [G] device per group
    teacher_step_time: float
    context: DecodeContext  # what a load-aware decoder tracks

    def score(self, group_devices: np.ndarray, oom_penalty: float):
        """``(step_time [K], oom [K], reward [K])`` of placements of groups ``[K, G]``."""
        res = self.sim.run_batch(self.grouping.expand(group_devices))
        overflow = np.max(res.peak_memory / self.sim.memory_bytes[None, :] - 1.0, axis=1)
        return res.step_time, res.oom, reinforce.rewards(res.step_time, res.oom, overflow, self.sim.lower_bound,
                                                         oom_penalty)


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


HISTORY_FIELDS = ("step", "phase", "env", "elapsed_seconds", "loss", "grad_norm", "mean_step_time_ratio",
                  "min_step_time_ratio", "oom_fraction", "entropy")


# -- corpus and environments ---------------------------------------------------------------------
def read_manifest(corpus: str | Path) -> tuple[Path, dict[str, Any]]:
    """The corpus folder and its manifest (``corpus`` may name the folder or its manifest.json).

    Raises
    ------
    PlacerError
        If there is no readable manifest or it lists no graph.
    """
    path = Path(corpus)
    if path.is_dir():
        path = path / "manifest.json"
    if not path.is_file():
        raise PlacerError(f"no corpus manifest at {str(path)!r} (make one with corpus/make_corpus.py)")
    manifest = read_json_file(path, "corpus manifest")
    if not isinstance(manifest, dict) or not isinstance(manifest.get("graphs"), list) or not manifest["graphs"]:
        raise PlacerError(f"{str(path)!r}: a corpus manifest needs a non-empty 'graphs' list")
    for e in manifest["graphs"]:
        if not isinstance(e, dict) or not {"name", "family", "split", "path"} <= set(e):
            raise PlacerError(f"{str(path)!r}: every graph entry needs name, family, split and path")
    return path.parent, manifest


def training_entries(manifest: dict[str, Any]) -> list[dict[str, Any]]:
    """The manifest's training graphs: split "train" and family not held out.

    Raises
    ------
    PlacerError
        If a graph marked "train" belongs to a held-out family (the split would leak).
    """
    heldout = set(manifest.get("heldout_families", []))
    train = [e for e in manifest["graphs"] if e["split"] == "train"]
    leaked = [e["name"] for e in train if e["family"] in heldout]
    if leaked:
        raise PlacerError(f"corpus manifest lists graphs of held-out families for training: {leaked}")
    if not train:
        raise PlacerError("the corpus has no training graph")
    return train


def chosen_entries(entries: list[dict[str, Any]], names: list[str] | None) -> list[dict[str, Any]]:
    """The training `entries` that `names` name, in the manifest's order (all of them when `names` is None).

    Raises
    ------
    PlacerError
        If a name is not one of the training graphs (unknown, or of the validation or held-out split).
    """
    if names is None:
        return entries
    known = {e["name"] for e in entries}
    missing = [n for n in dict.fromkeys(names) if n not in known]
    if missing:
        raise PlacerError(f"--graphs: {missing[0]!r} is not a training graph of the corpus"
                          + (f" (and {len(missing) - 1} more)" if len(missing) > 1 else "")
                          + "; validation and held-out graphs are never trained on")
    chosen = set(names)
    return [e for e in entries if e["name"] in chosen]


def validation_entries(manifest: dict[str, Any]) -> list[dict[str, Any]]:
    """The manifest's validation graphs (split "validation"); they choose the exported checkpoint.

    Raises
    ------
    PlacerError
        If a validation graph's family is trained on or held out (the choice would not be of unseen graphs,
        or would leak the held-out ones).
    """
    train = {e["family"] for e in manifest["graphs"] if e["split"] == "train"}
    heldout = set(manifest.get("heldout_families", []))
    val = [e for e in manifest["graphs"] if e["split"] == "validation"]
    bad = [e["name"] for e in val if e["family"] in train | heldout]
    if bad:
        raise PlacerError(f"corpus manifest lists validation graphs of trained or held-out families: {bad}")
    return val


def teacher_placement(graph: OpGraph, cluster: Cluster, sim: Simulator, grouping: Grouping,
                      teachers: tuple[str, ...]) -> tuple[str, np.ndarray, float]:
    """The best of the teachers' placements and every single device once projected onto groups
    (`placer.placers.best`: fitting first, then fastest; the teachers before single devices among equals):
    its name, device per group ``[G]`` and step time."""
    weights = sim.times.min(axis=1)

    def grouped(assignment: np.ndarray) -> np.ndarray:
        return grouping.project(assignment, len(cluster), weights=weights)

    def score(assignments: np.ndarray):
        res = sim.run_batch(grouping.expand(np.stack([grouped(a) for a in assignments])))
        return res.step_time, res.oom

    found = best.ranked_heuristics(graph, cluster, [*teachers, *best.single_devices(cluster)], score=score)[0]
    return found.name, grouped(found.assignment), found.cost


def canonical_labels(devices: np.ndarray, cluster: Cluster) -> np.ndarray:
    """Relabel identical devices in order of first use: the first GPU used becomes the first GPU, and so on.

    Identical GPUs are interchangeable, so a heuristic's choice among them is
    arbitrary; imitating placements written in one canonical labelling is a
    far more consistent target across graphs. (The caller checks with the
    simulator that the relabelled placement is as fast, as it is whenever the
    links are symmetric too.)
    """
    key = [(d.kind, d.peak_flops, d.memory_bandwidth, d.memory_bytes, d.op_overhead) for d in cluster.devices]
    classes: dict[tuple, list[int]] = {}
    for i, k in enumerate(key):
        classes.setdefault(k, []).append(i)
    mapping: dict[int, int] = {}
    for members in classes.values():
        used = list(dict.fromkeys(int(d) for d in devices if int(d) in members))
        for new, old in zip(members, used):
            mapping[old] = new
    return np.array([mapping.get(int(d), int(d)) for d in devices], dtype=np.int64)


def _canonical(sim: Simulator, grouping: Grouping, cluster: Cluster, devices: np.ndarray,
               step_time: float) -> np.ndarray:
    relabelled = canonical_labels(devices, cluster)
    res = sim.run_batch(grouping.expand(relabelled[None, :]))
    if not res.oom[0] and res.step_time[0] <= step_time * (1 + 1e-9):
        return relabelled
    return devices


def make_environment(graph: OpGraph, cluster: Cluster, groups: int, teachers: tuple[str, ...],
                     cached: dict[str, Any] | None = None, refine_seconds: float = 0.0,
                     kind_groups: bool = False, balanced_groups: bool = False,
                     critical_groups: bool = False) -> Environment:
    """Group, featurise and find the teacher of one (graph, cluster) pair.

    The teacher is the fastest of `teachers` once grouped, then (with
    `refine_seconds`) improved by that much local search over group moves;
    it comes from `cached` instead when that was made the same way (same
    groups, the same heuristics, searched or not).
    """
    if len(cluster) > MAX_DEVICES:
        raise PlacerError(f"cluster {cluster.name!r} has {len(cluster)} devices; the policy handles at most "
                          f"{MAX_DEVICES}")
    sim = Simulator(graph, cluster)
    if not sim.lower_bound > 0:  # rewards are step time over it, ratios step time over the teacher's: 0 / 0
        raise PlacerError(f"graph {graph.name!r} on {cluster.name!r}: its ops all cost nothing (step time 0 "
                          "whatever the placement), so there is nothing to learn from it; leave it out of the corpus")
    grouping = group_graph(graph, cluster, groups, sim.times, split_kinds=kind_groups, balanced=balanced_groups,
                           split_critical=critical_groups)
    feats = group_features(graph, cluster, grouping, sim.times)
    key = env_key(graph, cluster)
    if (cached is not None and len(cached["devices"]) == grouping.num_groups
            and cached["teacher"].endswith(SEARCHED) == (refine_seconds > 0)
            and bool(cached.get("kind_groups", False)) == kind_groups
            and bool(cached.get("balanced_groups", False)) == balanced_groups
            and bool(cached.get("critical_groups", False)) == critical_groups
            and tuple(cached.get("teachers", teachers)) == tuple(teachers)):
        teacher, devices, step_time = cached["teacher"], np.asarray(cached["devices"], np.int64), cached["step_time"]
    else:
        teacher, devices, step_time = teacher_placement(graph, cluster, sim, grouping, teachers)
        if refine_seconds > 0:
            found = descend(sim, grouping.group_of_op, grouping.expand(devices), seconds=refine_seconds)
            teacher = teacher + SEARCHED
            devices = grouping.project(found.assignment, len(cluster))  # moves were of whole groups: exact
            step_time = float(sim.run_batch(grouping.expand(devices[None, :])).step_time[0])
    devices = _canonical(sim, grouping, cluster, devices, step_time)
    return Environment(key, graph, cluster, sim, grouping, feats, device_features(cluster), teacher, devices,
                       step_time, decode_context(graph, cluster, grouping, sim.times))


# -- the pre-trainer ---------------------------------------------------------------------------
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


# -- files --------------------------------------------------------------------------------------
def _tf_checkpoint(p: Pretrainer):
    import tensorflow as tf

    return tf.train.Checkpoint(policy=p.policy, optimizer=p.optimizer)


def save(p: Pretrainer, out: Path, name: str, version: str) -> None:
    """Checkpoint (weights, Adam, state); `export` writes ``out/policy``."""
    import shutil

    ckpt = out / CHECKPOINT_DIR
    ckpt.mkdir(parents=True, exist_ok=True)
    prefix = f"step-{p.state.step}"
    _tf_checkpoint(p).write(str(ckpt / prefix))
    state = {"format": 1, "config": asdict(p.config), "envs": [e.key for e in p.envs],
             "fingerprints": {e.key: e.graph.fingerprint for e in p.envs},
             "cluster_fingerprints": {e.cluster.name: e.cluster.fingerprint for e in p.envs},
             "state": p.state.to_dict(), "checkpoint": f"{CHECKPOINT_DIR}/{prefix}", "name": name, "version": version,
             "init": p.init}
    write_atomic(out / STATE_FILE, json.dumps(state).encode())
    for old in ckpt.iterdir():
        if not old.name.startswith(prefix + ".") and old.name != "checkpoint":
            old.unlink() if old.is_file() else shutil.rmtree(old)


def should_export(p: Pretrainer) -> bool:
    """Whether the latest evaluation's weights go to ``out/policy``: always without validation graphs or
    with ``export="last"``, else when they are the fastest on them so far (recorded in ``p.exported``)."""
    if not p.validation:
        return True
    last = p.state.evals[-1]
    if (p.config.export == "validation" and p.exported
            and last["validation_geomean_ratio"] >= p.exported["validation_geomean_ratio"]):
        return False
    p.exported = {"step": last["step"], "validation_geomean_ratio": last["validation_geomean_ratio"]}
    return True


def export(p: Pretrainer, out: Path, name: str, version: str) -> None:
    """Evaluate the greedy policy, and export its weights to ``out/policy`` if `should_export` says so."""
    p.state.evals.append(p.evaluate_greedy())
    if should_export(p):
        save_policy(out / POLICY_DIR, weights_of(p.policy), p.card(name, version))


def restore(p: Pretrainer, out: Path) -> None:
    """Load a saved run into `p` (same config and environments).

    Raises
    ------
    PlacerError
        If there is no saved run, or it was made with another config or environments.
    """
    path = out / STATE_FILE
    if not path.exists():
        raise PlacerError(f"no pre-training run to resume in {str(out)!r} (no {STATE_FILE})")
    saved = read_json_file(path, "pre-training state")
    mine = {k: v for k, v in asdict(p.config).items() if k != "export"}
    theirs = saved_config(out)
    defaults = asdict(PretrainConfig())  # a setting newer than the run: it ran with the default
    diff = sorted(k for k, v in mine.items() if theirs.get(k, defaults[k]) != v)
    if diff:
        raise PlacerError(f"cannot resume the run in {str(out)!r}: it was made with other settings ({diff})")
    check_same_environments(out, [(e.graph, e.cluster) for e in p.envs], saved)
    try:
        _tf_checkpoint(p).read(str(out / saved["checkpoint"])).assert_consumed()
    except Exception as e:
        raise PlacerError(f"cannot read the checkpoint in {str(out)!r}: {type(e).__name__}") from None
    p.state = PretrainState.from_dict(saved["state"])
    p.init = saved.get("init")
    chosen = exported_card(out).get("validation")
    if p.validation and chosen:  # the policy on disk, not the last checkpoint's view of it, is what to beat
        p.exported = {"step": chosen["step"], "validation_geomean_ratio": chosen["greedy_geomean_ratio_to_teacher"]}


def env_key(graph: OpGraph, cluster: Cluster) -> str:
    """The name of a (graph, cluster) environment in saved runs and teachers.json."""
    return f"{graph.name}@{cluster.name}"


def check_same_environments(out: Path, pairs: list[tuple[OpGraph, Cluster]],
                            saved: dict[str, Any] | None = None) -> None:
    """A PlacerError unless the run saved in `out` trained on these (graph, cluster) pairs, in this order.

    The command calls it before building the environments, which takes minutes
    on a corpus (teachers), so that resuming on another corpus or clusters
    fails at once; graphs and clusters are compared by fingerprint where the run kept them.
    """
    saved = read_json_file(out / STATE_FILE, "pre-training state") if saved is None else saved
    keys = [env_key(g, c) for g, c in pairs]
    theirs = saved.get("envs", [])
    where = f"cannot resume the run in {str(out)!r}"
    if theirs != keys:
        only_saved = [k for k in theirs if k not in keys]
        only_here = [k for k in keys if k not in theirs]
        what = "; ".join(f"{label} {', '.join(ks[:3])}{' ...' if len(ks) > 3 else ''}"
                         for label, ks in (("only in the run:", only_saved), ("only here:", only_here)) if ks)
        raise PlacerError(f"{where}: it was made on other graphs or clusters ({what or 'in another order'})")
    prints = saved.get("fingerprints", {})
    changed = sorted({g.name for g, c in pairs if prints.get(env_key(g, c), g.fingerprint) != g.fingerprint})
    if changed:
        raise PlacerError(f"{where}: it was made on other graphs of the same names ({', '.join(changed[:3])}"
                          f"{' ...' if len(changed) > 3 else ''}: other ops or costs)")
    prints = saved.get("cluster_fingerprints", {})
    changed = sorted({c.name for _, c in pairs if prints.get(c.name, c.fingerprint) != c.fingerprint})
    if changed:
        raise PlacerError(f"{where}: it was made on other clusters of the same names ({', '.join(changed)}: "
                          "other devices or links)")


def saved_config(out: Path) -> dict[str, Any]:
    """The settings of the run saved in `out` (`PretrainConfig` fields), empty when there is none: a resume's
    defaults, so that ``--resume`` needs only the flags it changes."""
    path = out / STATE_FILE
    if not path.exists():
        return {}
    config = dict(read_json_file(path, "pre-training state").get("config", {}))
    if "teachers" in config:
        config["teachers"] = tuple(config["teachers"])
    return config


def exported_card(out: Path) -> dict[str, Any]:
    """The exported policy's card (its ``validation`` choice, its ``sampling``); empty before any export."""
    path = out / POLICY_DIR
    return load_policy(path).card if path.is_dir() else {}


def load_teachers(out: Path) -> dict[str, Any]:
    path = out / TEACHERS_FILE
    return read_json_file(path, "teachers") if path.exists() else {}


def save_teachers(out: Path, envs: list[Environment], kind_groups: bool = False,
                  balanced_groups: bool = False, critical_groups: bool = False,
                  teachers: tuple[str, ...] = DEFAULT_TEACHERS, keep: dict[str, Any] | None = None) -> None:
    """Write teachers.json: the teachers of `envs`, over the entries of `keep` (the file as it was). Written
    after each environment while they are built, so that a run interrupted in its set-up (minutes with
    ``--refine-teachers``) finds the teachers it already placed when started again."""
    data = dict(keep or {})
    data.update({e.key: {"teacher": e.teacher, "devices": e.teacher_devices.tolist(),
                         "step_time": e.teacher_step_time, "kind_groups": kind_groups,
                         "balanced_groups": balanced_groups, "critical_groups": critical_groups,
                         "teachers": list(teachers)}
                 for e in envs})
    write_atomic(out / TEACHERS_FILE, json.dumps(data).encode())


def run(p: Pretrainer, out: Path, *, budget_seconds: float, name: str = "pretrained", version: str = "1",
        on_step: Callable[[dict[str, Any]], None] | None = None, should_stop: Callable[[], bool] = lambda: False,
        resumed: bool = False, on_temperature: Callable[[float, float], None] | None = None,
        max_steps: int | None = None) -> str:
    """Train until the budget (whole run, resumes included) is spent, or `max_steps` steps are made in all
    (a limit that does not depend on the machine's speed, for tests); returns ``"done"`` or ``"interrupted"``.

    Each step's update and its history row are `placer.errors.uninterruptible` (a second Ctrl-C there stops
    the run after the step), so the checkpoint saved on the way out holds one step's weights and count.
    Writes history.csv, progress.json, curve.png, checkpoints and ``out/policy`` as it goes; once
    done, chooses the exported policy's sampling temperature (`tune_sampling`; `on_temperature`
    hears each one measured); `should_stop` stops that too, and a resume chooses it again.
    """
    s = p.state
    history = History(out / HISTORY_FILE, HISTORY_FIELDS, keep_until=s.step if resumed else 0, flush_every_row=False)
    evaluations, checkpoints = Cadence(EVAL_EVERY_SECONDS), Cadence(CHECKPOINT_EVERY_SECONDS)
    if not s.evals:
        export(p, out, name, version)
    reason = "done"
    try:
        while s.elapsed_seconds < budget_seconds and (max_steps is None or s.step < max_steps):
            if should_stop():
                reason = "interrupted"
                break
            t0 = time.perf_counter()
            imitating = s.elapsed_seconds < p.config.imitation_fraction * budget_seconds
            p.set_learning_rate(p.config.imitation_learning_rate if imitating else p.config.learning_rate)
            rollout = None if imitating else p.reinforce_rollout()  # a second Ctrl-C still stops this at once
            with uninterruptible():  # weights, state and the history row of the step change together
                row = p.imitation_step() if imitating else p.reinforce_learn(rollout)
                s.elapsed_seconds += time.perf_counter() - t0
                row["elapsed_seconds"] = s.elapsed_seconds
                history.append(row)
                if on_step is not None:
                    on_step(row)
            now = time.monotonic()
            if evaluations.due(now):
                export(p, out, name, version)
                evaluations.done(now)
            if checkpoints.due(now):
                history.flush()
                save(p, out, name, version)
                _progress(out, p, budget_seconds, "running")
                checkpoints.done(now)
    finally:
        history.close()
        export(p, out, name, version)
        save(p, out, name, version)
        _progress(out, p, budget_seconds, "done" if reason == "done" else "interrupted")
        plot_pretraining_curve(p.state.evals, out / CURVE_FILE, pairs=len(p.envs))
    if reason == "done" and p.validation:
        if tune_sampling(p, out, on_temperature, should_stop) is None:  # stopped: a resume tunes again
            reason = "interrupted"
            _progress(out, p, budget_seconds, reason)
    return reason


def tune_sampling(p: Pretrainer, out: Path, on_temperature: Callable[[float, float], None] | None = None,
                  should_stop: Callable[[], bool] = lambda: False) -> dict[str, Any] | None:
    """Choose the exported policy's sampling temperature on the validation environments
    (`placer.rl.sampling`) and write it to its card; None (temperature 1) without validation graphs,
    or when `should_stop` cut the sweep short (the card is left as it was).

    Done once the run is over, because a later export would replace the card.
    """
    from placer.rl.sampling import choose_temperature

    if not p.validation:
        return None
    policy = load_policy(out / POLICY_DIR)
    sampling = choose_temperature(policy, p.validation, seed=p.config.seed, on_temperature=on_temperature,
                                  should_stop=should_stop)
    if sampling is None:
        return None
    save_policy(out / POLICY_DIR, policy.weights, {**policy.card, "sampling": sampling})
    return sampling


def _progress(out: Path, p: Pretrainer, budget: float, state: str) -> None:
    last = p.state.evals[-1] if p.state.evals else {}
    data = {"state": state, "step": p.state.step, "imitation_steps": p.state.imitation_steps,
            "samples": p.state.samples, "elapsed_seconds": p.state.elapsed_seconds, "budget_seconds": budget,
            "greedy_geomean_ratio": last.get("geomean_ratio"),
            "validation_geomean_ratio": last.get("validation_geomean_ratio"), "exported": p.exported or None}
    write_progress(out, data)
