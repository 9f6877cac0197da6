"""A pre-training run's checkpoint and exported policy in its folder.

``pretrain_state.json`` (config, environments and their fingerprints, state,
the policy's name and version) beside ``checkpoint/`` (TF weights and Adam)
is what ``resume`` reads back (`restore`); ``policy/`` is the exported policy
(`placer.rl.saved_policy`) that zero-shot placement and fine-tuning load:
the evaluated checkpoint fastest on the validation graphs, or the last
(`should_export`).
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

from placer.cluster import Cluster
from placer.errors import PlacerError
from placer.fileio import read_json_file, write_atomic
from placer.graph import OpGraph
from placer.rl.config import PretrainConfig
from placer.rl.pretrain.environment import env_key
from placer.rl.pretrain.pretrainer import Pretrainer, PretrainState
from placer.rl.saved_policy import load_policy, save_policy, weights_of


STATE_FILE = "pretrain_state.json"
CHECKPOINT_DIR = "checkpoint"
POLICY_DIR = "policy"


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
    changed = sorted({c.name for _, c in pairs if not c.same_hardware(prints.get(c.name))})
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
