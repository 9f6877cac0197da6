"""`bench/bench_rl.py`: its grouping flags reach the trainer, and its tables say which grouping ran."""

import pytest

from bench import bench_rl
from placer.rl.trainer import TrainConfig


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
    def stopped(graph, cluster):
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


def _kept_row(tmp_path, **settings):
    """An OUT folder holding one kept row of a 30-op graph on 2gpu at 60 s, made with `settings`."""
    from placer.graph_io import save_graph
    from placer.synthetic import layered_graph

    graph = layered_graph(30, seed=0)
    save_graph(graph, tmp_path / "g.json.gz")
    (tmp_path / "out" / "rows").mkdir(parents=True)
    row = {"graph": graph.name, "cluster": "2gpu", "budget_seconds": 60.0, "starts": 1, "samples_per_step": 32,
           "max_groups": 256, "seed": 0, "warm_start_mode": "heuristic", "kind_groups": True,
           "balanced_groups": True, "critical_groups": False, **settings}
    path = bench_rl._row_path(tmp_path / "out", graph.name, "2gpu", 60.0)
    path.write_text(__import__("json").dumps(row))
    return tmp_path / "out", str(tmp_path / "g.json.gz")


@pytest.mark.parametrize("argv, settings, message", [
    (["--seed", "1"], {}, "--seed 0 (not 1)"),
    (["--groups", "128"], {}, "--groups 256 (not 128)"),
    ([], {"kind_groups": False, "balanced_groups": False}, "--no-kind-groups (not --kind-groups)"),
])
def test_a_kept_row_of_other_settings_is_refused_not_reused(tmp_path, argv, settings, message):
    """It was skipped as done, and the table reported it under this run's settings."""
    from placer.errors import PlacerError

    out, graph = _kept_row(tmp_path, **settings)
    args = bench_rl.parse_args(["--budget-seconds", "60", "--clusters", "2gpu", "--graphs", graph, *argv])
    with pytest.raises(PlacerError, match=message.replace("(", r"\(").replace(")", r"\)")):
        bench_rl.run_all(args, out)
    with pytest.raises(PlacerError, match="give this run another --out"):
        bench_rl.report(args, out)


def test_a_kept_row_of_the_same_settings_is_kept(tmp_path, capsys):
    out, graph = _kept_row(tmp_path)
    args = bench_rl.parse_args(["--budget-seconds", "60", "--clusters", "2gpu", "--graphs", graph])
    bench_rl.run_all(args, out)
    assert "kept from an earlier run, skipped" in capsys.readouterr().err


@pytest.mark.parametrize("argv, message", [
    (["--budget-seconds", "-5"], "--budget-seconds must be positive, got -5"),
    (["--samples", "0"], r"samples must be an integer of at least 2 \(the advantage compares samples\), got 0"),
    (["--clusters", "2gpu", "9gpu"], "unknown cluster preset '9gpu'"),
])
def test_bad_settings_are_refused_before_any_run(argv, message):
    from placer.errors import PlacerError

    with pytest.raises(PlacerError, match=message):
        bench_rl.check_args(bench_rl.parse_args(argv))
