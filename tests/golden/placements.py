"""Record or check the placements a refactoring must leave identical.

Every heuristic's placement of every ``graphs/`` graph on `CLUSTERS`, the
shipped policy's zero-shot answer (best of 256, seed 0) on the same pairs, and a seeded ``placer train`` run of a fixed number of steps:
each kept as a hash of its op -> device map, its simulated step time and its
OOM flag. A refactoring that changes none of the numbers leaves every entry
identical; one that changes the world model on purpose records anew, saying
why in its commit.

Run: python -m tests.golden.placements --check    (exit 1 naming every difference)
     python -m tests.golden.placements --record   (writes tests/golden/placements.json)
Add ``--skip-train`` to leave out the training run (about a minute; recording
keeps the recorded one).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = Path(__file__).with_name("placements.json")
CLUSTERS = ("2gpu-flat", "4gpu-flat", "8gpu-flat", "4gpu", "8gpu-nvlink", "dgx-a100")
"""The flat V100 presets (the idealised model, whose numbers must never move by accident) and three topologies."""
TRAIN = {"graph": "rnnlm", "cluster": "4gpu-flat", "steps": 30, "seed": 0}
"""The training run: fixed steps, not a time budget, so it is the same run on any machine."""


def devices_digest(devices: dict[str, str]) -> str:
    """A short hash of an op -> device map, independent of key order."""
    text = json.dumps(sorted(devices.items()), separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def entry(devices: dict[str, str], step_time: float, oom: bool) -> dict[str, Any]:
    return {"devices": devices_digest(devices), "step_time": repr(float(step_time)), "oom": bool(oom)}


def graph_files(names: tuple[str, ...] | None = None) -> list[Path]:
    """``graphs/*.json.gz``, or those of `names` (file stems without ``.json``)."""
    files = sorted((ROOT / "graphs").glob("*.json.gz"))
    return files if names is None else [f for f in files if f.name.removesuffix(".json.gz") in names]


def heuristic_entries(graphs: tuple[str, ...] | None = None, progress: bool = True,
                      clusters: tuple[str, ...] = CLUSTERS) -> dict[str, Any]:
    """``{"graph/cluster/method": entry}`` for every heuristic on `clusters`."""
    from placer.presets import load_cluster
    from placer.graph_io import load_graph
    from placer.placers import registry

    out: dict[str, Any] = {}
    for path in graph_files(graphs):
        graph = load_graph(path)
        for cluster_name in clusters:
            cluster = load_cluster(cluster_name)
            for method in registry.names(heuristic_only=True):
                key = f"{graph.name}/{cluster_name}/{method}"
                p = registry.place(method, graph, cluster)
                out[key] = entry(p.devices, p.step_time, p.oom)
                if progress:
                    print(f"  {key}: {p.step_time:.6g} s", file=sys.stderr)
    return out


def zero_shot_entries(graphs: tuple[str, ...] | None = None, progress: bool = True) -> dict[str, Any]:
    """``{"graph/cluster/zero_shot": entry}``: the shipped policy's answer, best of 256 samples, seed 0."""
    from placer.presets import load_cluster
    from placer.graph_io import load_graph
    from placer.rl.saved_policy import load_policy
    from placer.rl.zero_shot import place_zero_shot

    policy = load_policy("shipped")
    out: dict[str, Any] = {}
    for path in graph_files(graphs):
        graph = load_graph(path)
        for cluster_name in CLUSTERS:
            p = place_zero_shot(graph, load_cluster(cluster_name), policy, samples=256, seed=0)
            out[f"{graph.name}/{cluster_name}/zero_shot"] = entry(p.devices, p.step_time, p.oom)
            if progress:
                print(f"  {graph.name}/{cluster_name}/zero_shot: {p.step_time:.6g} s", file=sys.stderr)
    return out


def train_entry() -> dict[str, Any]:
    """The best placement of ``placer train`` with `TRAIN`'s graph, cluster, steps and seed (the CLI, as users run it)."""
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys.executable, "-m", "placer.cli.main", "train", str(ROOT / "graphs" / f"{TRAIN['graph']}.json.gz"),
                        "--cluster", TRAIN["cluster"], "--steps", str(TRAIN["steps"]), "--seed", str(TRAIN["seed"]),
                        "--out", tmp], check=True, stdout=subprocess.DEVNULL)
        best = json.loads((Path(tmp) / "best_placement.json").read_text())
    return {f"{TRAIN['graph']}/{TRAIN['cluster']}/train": entry(best["devices"], best["step_time"], best["oom"])}


def collect(skip_train: bool = False) -> dict[str, Any]:
    out = {**heuristic_entries(), **zero_shot_entries()}
    if not skip_train:
        out.update(train_entry())
    return out


def differences(expected: dict[str, Any], got: dict[str, Any]) -> list[str]:
    """One line per entry of `got` that differs from `expected` or is missing there, and per entry missing in `got`."""
    lines = [f"{k}: expected {expected[k]}, got {v}" for k, v in got.items() if k in expected and expected[k] != v]
    lines += [f"{k}: new (not recorded)" for k in got if k not in expected]
    lines += [f"{k}: recorded but not produced" for k in expected if k not in got]
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = ap.add_mutually_exclusive_group(required=True)
    mode.add_argument("--record", action="store_true", help=f"write {GOLDEN.relative_to(ROOT)}")
    mode.add_argument("--check", action="store_true", help="compare with the recorded placements")
    ap.add_argument("--skip-train", action="store_true", help="leave out the training run")
    args = ap.parse_args(argv)
    got = collect(skip_train=args.skip_train)
    if args.record:
        if args.skip_train and GOLDEN.exists():  # keep the recorded training run
            got.update({k: v for k, v in json.loads(GOLDEN.read_text()).items() if k.endswith("/train")})
        GOLDEN.write_text(json.dumps(got, indent=1, sort_keys=True) + "\n")
        print(f"recorded {len(got)} placements in {GOLDEN.relative_to(ROOT)}")
        return 0
    expected = json.loads(GOLDEN.read_text())
    if args.skip_train:
        expected = {k: v for k, v in expected.items() if not k.endswith("/train")}
    diff = differences(expected, got)
    for line in diff:
        print(line)
    print(f"{len(got) - len([d for d in diff if ': expected' in d])} of {len(got)} placements identical")
    return 1 if diff else 0


if __name__ == "__main__":
    sys.exit(main())
