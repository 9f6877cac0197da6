"""Checkpoints of a training run: the TF checkpoint of policy and optimizer, plus the trainer state.

Layout inside a run's folder::

    checkpoint/step-N*        tf.train.Checkpoint of the policy and Adam (latest only)
    trainer_state.json        config, step, samples, elapsed, baseline, best placement, warm start,
                              the heuristic placement the op groups were shaped by, and which
                              checkpoint holds the matching weights

The JSON is written (atomically) after the checkpoint, so it never points at
weights that are not on disk.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from placer.cluster import Cluster
from placer.errors import PlacerError
from placer.graph import OpGraph
from placer.fileio import read_json_file, write_atomic
from placer.rl.run_folder import TRAINER_STATE_FILE
from placer.rl.state import TrainerState, config_from_saved
from placer.rl.trainer import TrainConfig, Trainer

CHECKPOINT_DIR = "checkpoint"
FORMAT = 1


def _tf_checkpoint(trainer: Trainer):
    import tensorflow as tf

    return tf.train.Checkpoint(policy=trainer.policy, optimizer=trainer.optimizer)


def save(trainer: Trainer, directory: str | Path) -> Path:
    """Save the run in `directory`; returns the path of the state file."""
    directory = Path(directory)
    ckpt_dir = directory / CHECKPOINT_DIR
    ckpt_dir.mkdir(parents=True, exist_ok=True)
    prefix = f"step-{trainer.state.step}"
    _tf_checkpoint(trainer).write(str(ckpt_dir / prefix))
    state = {
        "format": FORMAT,
        "graph": trainer.graph.name,
        "cluster": trainer.cluster.name,
        "num_ops": len(trainer.graph),
        "graph_fingerprint": trainer.graph.fingerprint,
        "num_devices": len(trainer.cluster),
        "cluster_fingerprint": trainer.cluster.fingerprint,
        "num_groups": trainer.grouping.num_groups,
        "config": asdict(trainer.config),
        "state": trainer.state.to_dict(),
        "reference": None if trainer.reference is None else {
            "name": trainer.reference[0], "devices": np.asarray(trainer.reference[1]).tolist(),
            "step_time": float(trainer.reference[2])},
        "checkpoint": f"{CHECKPOINT_DIR}/{prefix}",
    }
    path = directory / TRAINER_STATE_FILE
    write_atomic(path, json.dumps(state, indent=1).encode())
    for old in ckpt_dir.iterdir():  # keep only the weights the state file names
        if not old.name.startswith(prefix + ".") and old.name != "checkpoint":
            old.unlink() if old.is_file() else shutil.rmtree(old)
    return path


def load_state(directory: str | Path) -> dict[str, Any] | None:
    """The saved state of the run in `directory`, or None when there is none."""
    return read_state_file(Path(directory) / TRAINER_STATE_FILE, "trainer state", FORMAT)


def read_state_file(path: Path, what: str, fmt: int) -> dict[str, Any] | None:
    """A saved JSON state of format `fmt`, or None when `path` does not exist; a clear error when unreadable."""
    if not path.exists():
        return None
    saved = read_json_file(path, what)
    if not isinstance(saved, dict) or saved.get("format") != fmt:
        raise PlacerError(f"{what} {str(path)!r}: not a state file this version can read")
    return saved


def config_of(saved: dict[str, Any]) -> TrainConfig:
    """The config a saved run was trained with."""
    return config_from_saved(saved["config"])


def reference_of(saved: dict[str, Any]) -> tuple[str, np.ndarray, float] | None:
    """The best heuristic placement of a saved run (``Trainer(reference=...)``): its floor, and what a
    heuristic warm start shaped its groups by.

    A resumed run must group ops as it did at first, or its best placement
    (devices per group) would be read on other groups; the heuristics cannot
    simply run again, since a time cap may cut one short (`placer.placers.time_cap`). None for
    a run saved before every run kept one (without a warm start), or before this was kept.
    """
    ref = saved.get("reference")
    if not ref:
        return None
    return ref["name"], np.asarray(ref["devices"], dtype=np.int64), float(ref["step_time"])


def check_same_problem(saved: dict[str, Any], graph: OpGraph, cluster: Cluster, directory: str | Path,
                       what: str = "run") -> None:
    """A PlacerError unless the run saved as `saved` was trained on `graph` and `cluster`.

    Called before a trainer is built, since one built on another graph fails
    deep inside with numbers that mean nothing to the user. Checks the names,
    the op and device counts, and the graph's and cluster's fingerprints where
    the run saved them (runs saved before they were kept are checked on the rest).

    Raises
    ------
    PlacerError
        Naming what differs.
    """
    where = f"cannot resume the {what} in {str(directory)!r}"
    if "graph" in saved and (saved["graph"], saved.get("num_ops", len(graph))) != (graph.name, len(graph)):
        ops = f" ({saved['num_ops']} ops)" if "num_ops" in saved else ""
        raise PlacerError(f"{where}: it has graph {saved['graph']!r}{ops}, this one {graph.name!r} "
                          f"({len(graph)} ops)")
    if saved.get("graph_fingerprint", graph.fingerprint) != graph.fingerprint:
        raise PlacerError(f"{where}: it has another graph named {graph.name!r} (same op count, other ops or "
                          "costs)")
    if "cluster" in saved and (saved["cluster"], saved.get("num_devices", len(cluster))) != (cluster.name,
                                                                                           len(cluster)):
        raise PlacerError(f"{where}: it has cluster {saved['cluster']!r} ({saved.get('num_devices', '?')} "
                          f"devices), this one {cluster.name!r} ({len(cluster)} devices)")
    if not cluster.same_hardware(saved.get("cluster_fingerprint")):
        raise PlacerError(f"{where}: it has another cluster named {cluster.name!r} (same device count, other "
                          "devices or links)")


def restore(trainer: Trainer, directory: str | Path, saved: dict[str, Any] | None = None) -> None:
    """Load weights, optimizer and state saved in `directory` into `trainer`.

    Raises
    ------
    PlacerError
        If there is no saved run, or it was trained on another graph, cluster or grouping.
    """
    directory = Path(directory)
    saved = load_state(directory) if saved is None else saved
    if saved is None:
        raise PlacerError(f"no training run to resume in {str(directory)!r} (no {TRAINER_STATE_FILE})")
    check_same_problem(saved, trainer.graph, trainer.cluster, directory)
    if saved.get("num_groups") != trainer.grouping.num_groups:
        raise PlacerError(f"cannot resume the run in {str(directory)!r}: it has num_groups "
                          f"{saved.get('num_groups')!r}, this one {trainer.grouping.num_groups!r}")
    try:
        _tf_checkpoint(trainer).read(str(directory / saved["checkpoint"])).assert_consumed()
    except (ValueError, AssertionError) as e:
        raise PlacerError(f"checkpoint in {str(directory)!r} does not match the policy: {e}") from None
    except Exception as e:  # tf.errors.NotFoundError and friends
        raise PlacerError(f"cannot read the checkpoint in {str(directory)!r}: its files ({saved['checkpoint']}.*) "
                          f"are missing or damaged ({type(e).__name__}); the run cannot go on from it: start a new "
                          "one with another --out") from None
    trainer.state = TrainerState.from_dict(saved["state"])
