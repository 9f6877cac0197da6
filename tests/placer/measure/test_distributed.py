"""Scoring samples on Ray workers gives the same run as scoring them locally."""

from __future__ import annotations

import json

import numpy as np
import pytest

from placer import presets
from placer.graph_io import save_graph
from placer.simulator import Simulator
from placer.synthetic import layered_graph
from tests.placer.cli.conftest import cli  # noqa: F401  (the CLI runner fixture)

ray = pytest.importorskip("ray")
FAST = ["--samples", "8", "--groups", "12", "--warm-start", "none", "--steps", "3", "--seed", "5", "--json"]


@pytest.fixture(scope="module")
def local_ray():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


def test_ray_batch_equals_local_batch(local_ray):
    from placer.measure.distributed import RaySimulator

    sim = Simulator(layered_graph(60, seed=3), presets.get("2gpu"))
    places = np.random.default_rng(0).integers(0, len(sim.cluster), size=(7, len(sim.graph)))
    remote = RaySimulator(sim, workers=2)
    a, b = sim.run_batch(places), remote.run_batch(places)
    np.testing.assert_array_equal(a.step_time, b.step_time)
    np.testing.assert_array_equal(a.peak_memory, b.peak_memory)
    remote.shutdown()


def test_ray_reports_no_usage_statistics(local_ray, monkeypatch):
    """Ray sends usage statistics to its makers by default; a placer run must not."""
    from ray._common.usage import usage_lib

    from placer.measure.distributed import RaySimulator

    monkeypatch.delenv("RAY_USAGE_STATS_ENABLED", raising=False)
    assert usage_lib.usage_stats_enabled()  # Ray's default
    RaySimulator(Simulator(layered_graph(10, seed=3), presets.get("2gpu")), workers=1).shutdown()
    assert not usage_lib.usage_stats_enabled()


def test_train_with_ray_matches_train_without(local_ray, cli, tmp_path, monkeypatch):
    from placer.rl import trainer

    monkeypatch.setattr(trainer.TrainConfig, "jit", False)
    path = tmp_path / "g.json.gz"
    save_graph(layered_graph(40, seed=1), path)
    runs = {}
    for name, extra in (("plain", []), ("ray", ["--ray", "auto", "--ray-workers", "2"])):
        r = cli("train", path, "--cluster", "2gpu", "--out", tmp_path / name, *FAST, *extra)
        assert r.code == 0, r.err
        runs[name] = (json.loads((tmp_path / name / "best_placement.json").read_text()),
                      (tmp_path / name / "history.csv").read_text().splitlines())
    assert runs["plain"][0]["devices"] == runs["ray"][0]["devices"]
    assert runs["plain"][0]["step_time"] == runs["ray"][0]["step_time"]
    cols = runs["plain"][1][0].split(",")
    keep = [cols.index(c) for c in ("step", "mean_step_time", "min_step_time", "best_step_time", "mean_reward")]
    for x, y in zip(runs["plain"][1][1:], runs["ray"][1][1:]):
        assert [x.split(",")[k] for k in keep] == [y.split(",")[k] for k in keep]
