"""The environments of pre-training: one (graph, cluster) pair each, with its teacher.

An environment holds the pair's grouping, its size-free features
(`placer.rl.features`), a simulator, and a teacher placement: the best of a
few cheap heuristics and every single device once projected onto the groups
(`placer.placers.best`), optionally improved by local search, relabelled
canonically. Teachers are kept in ``teachers.json``, so a run started again
does not place them anew.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from placer.cluster import Cluster
from placer.errors import PlacerError
from placer.fileio import read_json_file, write_atomic
from placer.graph import OpGraph
from placer.grouping import Grouping, group_graph
from placer.placement import Provenance
from placer.placers import best
from placer.placers.refine import REFINER, descend
from placer.rl import reinforce
from placer.rl.config import PretrainConfig, default_of
from placer.rl.features import DecodeContext, decode_context, device_features, group_features
from placer.rl.policy import MAX_DEVICES
from placer.simulator import Simulator


TEACHERS_FILE = "teachers.json"
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
        return _score(self.sim, self.grouping.expand(group_devices), oom_penalty)


def _score(sim: Simulator, assignments: np.ndarray, oom_penalty: float):
    res = sim.run_batch(assignments)
    return res.step_time, res.oom, reinforce.simulated_rewards(res, sim.memory_bytes, sim.lower_bound, oom_penalty)


def env_key(graph: OpGraph, cluster: Cluster) -> str:
    """The name of a (graph, cluster) environment in saved runs and teachers.json."""
    return f"{graph.name}@{cluster.name}"


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
            and (REFINER in Provenance.of_lineage(cached["teacher"])[1].refined_by) == (refine_seconds > 0)
            and bool(cached.get("kind_groups", False)) == kind_groups
            and bool(cached.get("balanced_groups", False)) == balanced_groups
            and bool(cached.get("critical_groups", False)) == critical_groups
            and tuple(cached.get("teachers", teachers)) == tuple(teachers)):
        teacher, devices, step_time = cached["teacher"], np.asarray(cached["devices"], np.int64), cached["step_time"]
    else:
        teacher, devices, step_time = teacher_placement(graph, cluster, sim, grouping, teachers)
        if refine_seconds > 0:
            found = descend(sim, grouping.group_of_op, grouping.expand(devices), seconds=refine_seconds)
            teacher = Provenance(refined_by=(REFINER,)).lineage(teacher)
            devices = grouping.project(found.assignment, len(cluster))  # moves were of whole groups: exact
            step_time = float(sim.run_batch(grouping.expand(devices[None, :])).step_time[0])
    devices = _canonical(sim, grouping, cluster, devices, step_time)
    return Environment(key, graph, cluster, sim, grouping, feats, device_features(cluster), teacher, devices,
                       step_time, decode_context(graph, cluster, grouping, sim.times))


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
