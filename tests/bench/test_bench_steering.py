import json
from pathlib import Path

import numpy as np

from bench import bench_steering

RNNLM = Path(__file__).resolve().parents[2] / "graphs" / "rnnlm.json.gz"


def test_random_offers_keep_the_answers_device_and_as_many_devices_per_op():
    rng = np.random.default_rng(0)
    proposed = rng.random((50, 6)) < 0.4
    answer = rng.integers(0, 6, 50)
    proposed[np.arange(50), answer] = True
    offered = bench_steering.random_offers(proposed, answer, rng)
    assert offered[np.arange(50), answer].all()
    assert np.array_equal(offered.sum(axis=1), proposed.sum(axis=1))


def test_a_run_writes_each_depth_for_the_policy_and_at_random(tmp_path, capsys):
    out = tmp_path / "steering.json"
    assert bench_steering.main(["--graphs", str(RNNLM), "--clusters", "4gpu", "--out", str(out)]) == 0
    row = json.loads(out.read_text())["rows"][0]
    assert row["graph"] == "rnnlm" and row["steered"] <= row["unsteered"]
    assert set(row["depths"]) == {f"{s} {d}" for s in ("heft", "cpop") for d in (4, 8, 16)}
    assert all(v["policy"] > 0 and v["random"] > 0 for v in row["depths"].values())
    assert "rnnlm on 4gpu" in capsys.readouterr().out
