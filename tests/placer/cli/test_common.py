"""`placer.cli.common`: the options and checks several commands share, and how they stop."""

import os
import signal

import pytest

from placer.cli import common
from placer.errors import PlacerError


def test_objective_choices_match_the_objectives_module():
    """The CLI repeats the list to stay free of numba at parse time; the two must agree."""
    from placer.objectives import OBJECTIVES

    assert common.OBJECTIVES == OBJECTIVES


def test_warm_start_choices_match_the_config():
    """The CLI repeats the list to stay free of numba at parse time; the two must agree."""
    from placer.rl.config import WARM_STARTS

    assert common.WARM_STARTS == WARM_STARTS


def test_help_says_the_configs_defaults_when_printed():
    import argparse

    p = argparse.ArgumentParser(formatter_class=common.config_help("PretrainConfig"))
    p.add_argument("--samples", help="K (default {samples})")
    common.add_grouping_flags(p, "; or the policy's")
    text = " ".join(p.format_help().split())
    assert "K (default 16)" in text and "(default off; or the policy's)" in text


def test_run_folder_refuses_a_file(tmp_path):
    (tmp_path / "f").write_text("x")
    with pytest.raises(PlacerError, match="is a file, not a folder"):
        common.run_folder(str(tmp_path / "f"))
    assert common.run_folder(str(tmp_path / "new")) == tmp_path / "new"


@pytest.mark.parametrize("seconds", [0.0, -1.0, float("nan")])
def test_check_budget_refuses_non_positive(seconds):
    with pytest.raises(PlacerError, match="--budget-seconds must be positive"):
        common.check_budget(seconds)


def test_check_budget_accepts_positive_or_absent():
    common.check_budget(None)
    common.check_budget(0.5)


def test_check_at_least_names_the_first_flag_below_its_bound():
    from argparse import Namespace

    args = Namespace(rounds=3, per_round=0, random=-1, best_of=None)
    with pytest.raises(PlacerError, match="^--per-round must be at least 1, got 0$"):
        common.check_at_least(args, "rounds", "per_round")
    with pytest.raises(PlacerError, match="^--random must be 0 or more, got -1$"):
        common.check_at_least(args, "random", least=0)
    common.check_at_least(args, "rounds", "best_of")  # None: not given
    common.check_at_least(args, "per_round", least=0)


@pytest.mark.parametrize("name", ["", "  "])
def test_check_name_refuses_empty(name):
    with pytest.raises(PlacerError, match="--name must not be empty"):
        common.check_name(name)


@pytest.mark.parametrize("flags, message", [(["--name", ""], "--name must not be empty"),
                                            (["--version", ""], "--version must not be empty"),
                                            (["--max-graphs", "0"], "--max-graphs must be at least 1, got 0")])
def test_pretrain_refuses_a_bad_flag_before_making_its_folder(cli, tmp_path, flags, message):
    """`pretrain --name ""` ran a whole run under the default name; --max-graphs 0 placed teachers first."""
    r = cli("pretrain", str(tmp_path), *flags, "--out", str(tmp_path / "run"))
    assert r.code == 1 and message in r.err and not (tmp_path / "run").exists()


def test_stop_on_signal_asks_then_interrupts_then_restores():
    """First SIGTERM sets `requested`; a second raises KeyboardInterrupt; the old handler comes back."""
    before = signal.getsignal(signal.SIGTERM)
    with common.StopOnSignal() as stop:
        os.kill(os.getpid(), signal.SIGTERM)
        assert stop.requested
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGTERM)
    assert signal.getsignal(signal.SIGTERM) is before


def test_a_second_signal_in_an_uninterruptible_block_stops_after_it():
    """A training step's update must not be cut in two; the signal after the block raises again."""
    from placer.errors import uninterruptible

    with common.StopOnSignal() as stop:
        os.kill(os.getpid(), signal.SIGTERM)
        with uninterruptible():
            os.kill(os.getpid(), signal.SIGTERM)
            os.kill(os.getpid(), signal.SIGINT)
        assert stop.requested
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGINT)


@pytest.mark.parametrize("make, message", [
    (lambda tmp: tmp / "missing" / "out.json", "does not exist"),
    (lambda tmp: tmp, "is a folder, not a file"),
])
def test_output_file_refuses_a_missing_folder_and_never_creates_one(tmp_path, make, message):
    from placer.cli.common import output_file
    from placer.errors import PlacerError

    with pytest.raises(PlacerError, match=message):
        output_file(str(make(tmp_path)), "-o")
    assert not (tmp_path / "missing").exists()
    assert output_file(str(tmp_path / "ok.json"), "-o") == tmp_path / "ok.json"
    assert output_file(None, "-o") is None


def _ctrl_c():
    raise KeyboardInterrupt


def _interrupted_in_compiled_code():
    try:
        raise KeyboardInterrupt
    except KeyboardInterrupt as e:  # how numba hands back a Ctrl-C in compiled code
        raise SystemError("returned a result with an exception set") from e


@pytest.mark.parametrize("stop", [_ctrl_c, _interrupted_in_compiled_code])
def test_run_script_ends_an_interrupted_script_with_one_line(stop, capsys):
    """A bench script stopped by Ctrl-C says how to go on, exit 130, no traceback."""
    with pytest.raises(SystemExit) as stopped:
        common.run_script(stop, "bench_x", "the same command again continues")
    assert stopped.value.code == 130
    assert capsys.readouterr().err == "bench_x: interrupted; the same command again continues\n"


def test_run_script_passes_exit_codes_and_errors_through():
    with pytest.raises(SystemExit) as done:
        common.run_script(lambda: 0, "bench_x", "")
    assert done.value.code == 0
    with pytest.raises(ZeroDivisionError):
        common.run_script(lambda: 1 / 0, "bench_x", "")
