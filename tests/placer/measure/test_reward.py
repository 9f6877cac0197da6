"""`placer train --reward measured`: samples timed in TensorFlow."""

from __future__ import annotations

import csv
import json

import pytest

from placer.graph_io import save_graph
from placer.synthetic import layered_graph
from tests.placer.cli.conftest import cli  # noqa: F401  (the CLI runner fixture)

FAST = ["--steps", "1", "--samples", "2", "--groups", "4", "--warm-start", "none", "--json"]


@pytest.fixture(autouse=True)
def _no_xla(monkeypatch):
    from placer.rl import trainer

    monkeypatch.setattr(trainer.TrainConfig, "jit", False)


def test_train_on_measured_step_times(cli, tiny, tmp_path):
    _, _, graph, _ = tiny
    save_graph(graph, tmp_path / "g.json.gz")
    r = cli("train", tmp_path / "g.json.gz", "--cluster", "local", "--out", tmp_path / "run", "--reward", "measured",
            *FAST)
    assert r.code == 0, r.err
    rows = list(csv.DictReader(open(tmp_path / "run" / "history.csv")))
    assert rows and float(rows[0]["mean_step_time"]) > 0
    assert json.loads((tmp_path / "run" / "best_placement.json").read_text())["devices"]


def test_measured_reward_needs_a_tensorflow_graph(cli, tmp_path):
    save_graph(layered_graph(20, seed=1), tmp_path / "g.json.gz")
    r = cli("train", tmp_path / "g.json.gz", "--cluster", "local", "--out", tmp_path / "run", "--reward", "measured",
            *FAST)
    assert r.code == 1 and "carries no TensorFlow GraphDef" in r.err


@pytest.fixture()
def local_ray():
    ray = pytest.importorskip("ray")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


def test_ray_workers_measure_their_samples(tiny, local_ray):
    """With a MeasuredSimulator, the Ray workers time their chunk in TensorFlow: real, positive, not simulated."""
    import numpy as np

    from placer import presets
    from placer.measure.reward import MeasuredSimulator
    from placer.measure.distributed import RaySimulator
    from placer.simulator import Simulator

    from tests.placer.measure.conftest import split_placement

    graph, cluster = tiny[2], presets.get("local")
    sim = Simulator(graph, cluster)
    places = np.stack([np.zeros(len(graph), dtype=np.int64), split_placement(graph).assignment(graph, cluster)])
    remote = RaySimulator(MeasuredSimulator(sim, warmup=1, runs=2), workers=2)
    measured = remote.run_batch(places)
    simulated = sim.run_batch(places)
    remote.shutdown()
    assert measured.step_time.shape == (2,) and np.all(measured.step_time > 0)
    assert not np.array_equal(measured.step_time, simulated.step_time)
    np.testing.assert_array_equal(measured.peak_memory, simulated.peak_memory)  # memory stays simulated


def test_train_on_measured_step_times_over_ray(cli, tiny, tmp_path, local_ray):
    _, _, graph, _ = tiny
    save_graph(graph, tmp_path / "g.json.gz")
    r = cli("train", tmp_path / "g.json.gz", "--cluster", "local", "--out", tmp_path / "run", "--reward", "measured",
            "--ray", "auto", "--ray-workers", "2", *FAST)
    assert r.code == 0, r.err
    rows = list(csv.DictReader(open(tmp_path / "run" / "history.csv")))
    assert rows and float(rows[0]["mean_step_time"]) > 0
