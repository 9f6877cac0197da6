"""`bench/bench_ray.py`: bad input is one line, Ray missing is said plainly, and nothing leaves the machine."""

import importlib
import subprocess
import sys
from pathlib import Path

import pytest

from bench import bench_ray
from placer.errors import PlacerError

ROOT = Path(__file__).resolve().parents[2]


def test_ray_usage_stats_are_off(monkeypatch):
    """Ray sends usage statistics to ray.io unless RAY_USAGE_STATS_ENABLED=0: the benchmark is loopback only."""
    monkeypatch.delenv("RAY_USAGE_STATS_ENABLED", raising=False)
    importlib.reload(bench_ray)
    import os

    assert os.environ["RAY_USAGE_STATS_ENABLED"] == "0"


def test_without_ray_it_says_so(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError
    monkeypatch.setattr(sys, "argv", ["bench_ray.py", "--graph", "graphs/rnnlm.json.gz"])
    with pytest.raises(PlacerError, match="needs the ray package"):
        bench_ray.main()


@pytest.mark.parametrize("flag", ["--samples", "--repeats"])
def test_counts_below_one_are_refused(monkeypatch, flag):
    monkeypatch.setattr(sys, "argv", ["bench_ray.py", flag, "0"])
    with pytest.raises(PlacerError, match=f"{flag} must be at least 1, got 0"):
        bench_ray.main()


def test_a_missing_graph_is_one_line_and_exit_1(tmp_path):
    done = subprocess.run([sys.executable, "-m", "bench.bench_ray", "--graph", str(tmp_path / "nosuch.json")],
                          capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [f"bench_ray: error: graph '{tmp_path / 'nosuch.json'}': no such file"]
