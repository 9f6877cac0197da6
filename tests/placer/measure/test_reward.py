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
