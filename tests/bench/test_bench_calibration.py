"""`bench.bench_calibration`: each measured row is simulated on the preset of the GPU it ran on."""

import json
from pathlib import Path

from bench import bench_calibration
from placer.graph import Op, OpGraph

RESULTS = Path(bench_calibration.RESULTS) / "calibration.json"


def memory_bound() -> OpGraph:
    """Two element-wise ops moving 4 GB: their time is set by the GPU's memory bandwidth."""
    return OpGraph("add", [Op("a", "AddV2", [], output_bytes=2e9, flops=5e8),
                           Op("b", "AddV2", ["a"], output_bytes=2e9, flops=5e8)])


def test_h200_rows_simulate_on_dgx_h200(tmp_path, monkeypatch):
    """H200 rows on dgx-h200, whose faster memory they beat dgx-h100's with; H100 rows on dgx-h100."""
    monkeypatch.setattr(bench_calibration, "graph_for", lambda model, batch: memory_bound())
    out = tmp_path / "calibration.json"
    assert bench_calibration.main(["--out", str(out)]) == 0
    rows = [r for r in json.loads(out.read_text())["rows"] if r["kind"] == "measured"]
    h200 = [r for r in rows if "gpu_facts_h200" in r["source"]]
    h100 = [r for r in rows if "gpu_facts_h100" in r["source"]]
    assert len(h200) == len(bench_calibration.MEASURED) and len(h100) == len(bench_calibration.MEASURED_H100)
    assert {r["preset"] for r in h200} == {"dgx-h200"} and all("H200" in r["gpu"] for r in h200)
    assert {r["preset"] for r in h100} == {"dgx-h100"}
    assert all(r["ratio"] < r["ratio_on_dgx_h100"] for r in h200)


def test_recorded_h200_rows_name_dgx_h200():
    """The committed table: every row measured on the H200 was simulated on dgx-h200, the H100's on dgx-h100."""
    rows = json.loads(RESULTS.read_text())["rows"]
    for facts, preset in (("gpu_facts_h200", "dgx-h200"), ("gpu_facts_h100", "dgx-h100")):
        measured = [r for r in rows if facts in r["source"]]
        assert measured and {r["preset"] for r in measured} == {preset}
