"""`bench/bench_rl.py`: its grouping flags reach the trainer, and its tables say which grouping ran."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import bench_rl  # noqa: E402

from placer.rl.trainer import TrainConfig  # noqa: E402


def test_grouping_defaults_are_placer_trains():
    config = bench_rl.train_config(bench_rl.parse_args([]))
    assert (config.kind_groups, config.balanced_groups, config.critical_groups) == (
        TrainConfig.kind_groups, TrainConfig.balanced_groups, TrainConfig.critical_groups)


@pytest.mark.parametrize("flag", ["kind_groups", "balanced_groups", "critical_groups"])
def test_each_grouping_flag_reaches_the_trainer(flag):
    """--critical-groups was accepted and dropped: the rows said a grouping the runs did not use."""
    option = "--" + flag.replace("_", "-")
    on = bench_rl.train_config(bench_rl.parse_args([option]))
    off = bench_rl.train_config(bench_rl.parse_args([option.replace("--", "--no-", 1)]))
    assert getattr(on, flag) is True and getattr(off, flag) is False


def test_the_grouping_label_names_critical_groups():
    assert bench_rl.grouping_label(True, True, True) == "kind + balanced + critical"
    assert bench_rl.grouping_label(False, False) == "heavy-edge"


@pytest.fixture
def heuristic_stopped_by_ctrl_c():
    """A heuristic stopped by Ctrl-C inside numba-compiled code, which hands it back in a SystemError."""
    from placer.placers import registry

    @registry.register("test_ctrl_c", description="Ctrl-C in compiled code")
    def stopped(graph, cluster, **options):
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt as e:
            raise SystemError("returned a result with an exception set") from e

    yield
    registry._REGISTRY.pop("test_ctrl_c")


def test_ctrl_c_in_a_heuristic_stops_the_benchmark(heuristic_stopped_by_ctrl_c):
    """Not reported as a failed heuristic while the benchmark goes on."""
    from placer.presets import get
    from placer.synthetic import layered_graph

    with pytest.raises(KeyboardInterrupt):
        bench_rl.best_heuristic(layered_graph(30, seed=0), get("2gpu"))
