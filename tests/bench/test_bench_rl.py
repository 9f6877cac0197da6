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
