"""`bench/tune_temperature.py`: --write stores the choice only where it is told to, and bad input is one line."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from bench import tune_temperature
from placer.errors import PlacerError
from placer.rl.saved_policy import SHIPPED_POLICY_DIR
from placer.synthetic import layered_graph

ROOT = Path(__file__).resolve().parents[2]

SWEEP = {"temperature": 3.0, "samples": 4, "seed": 0, "chosen_on": ["v@2gpu"], "geomean_ratio_to_teacher": {"3": 0.9}}


@pytest.fixture
def nothing_swept(one_graph_corpus, monkeypatch):
    """A one-graph corpus, and a sweep that builds and samples nothing; returns the corpus folder."""
    monkeypatch.setattr(tune_temperature, "load_graph", lambda path: layered_graph(30, seed=0))
    monkeypatch.setattr(tune_temperature.pretrain, "make_environment", lambda *args, **kwargs: None)
    monkeypatch.setattr(tune_temperature, "choose_temperature", lambda policy, envs, samples, seed: SWEEP)
    return one_graph_corpus


def _run(monkeypatch, *argv):
    monkeypatch.setattr(sys, "argv", ["tune_temperature.py", *argv])
    return tune_temperature.main()


@pytest.mark.parametrize("policy", [[], ["--policy", "shipped"], ["--policy", str(SHIPPED_POLICY_DIR)],
                                    ["--policy", str(SHIPPED_POLICY_DIR / "critical")]])
def test_write_on_the_shipped_policy_is_refused_without_its_flag(nothing_swept, monkeypatch, policy):
    """`--write` rewrote the shipped policy's card (the default --policy), which the package installs."""
    def written(*args, **kwargs):
        pytest.fail("the shipped policy was written")

    monkeypatch.setattr(tune_temperature, "write_atomic", written)
    cards = {p: p.read_bytes() for p in SHIPPED_POLICY_DIR.rglob("*") if p.is_file()}
    with pytest.raises(PlacerError, match="--write would rewrite the shipped policy's card"):
        _run(monkeypatch, "--corpus", str(nothing_swept), "--cluster", "2gpu", *policy, "--write")
    assert {p: p.read_bytes() for p in SHIPPED_POLICY_DIR.rglob("*") if p.is_file()} == cards


def test_write_stores_the_choice_in_the_given_policys_card_alone(nothing_swept, monkeypatch, tmp_path):
    folder = tmp_path / "policy"
    shutil.copytree(SHIPPED_POLICY_DIR, folder)
    weights = (folder / "weights.npz").read_bytes()
    card = json.loads((folder / "policy.json").read_text())
    assert _run(monkeypatch, "--corpus", str(nothing_swept), "--cluster", "2gpu", "--policy", str(folder),
                "--write") == 0
    assert json.loads((folder / "policy.json").read_text()) == {**card, "sampling": SWEEP}
    assert (folder / "weights.npz").read_bytes() == weights


def test_write_shipped_without_write_is_refused(nothing_swept, monkeypatch):
    with pytest.raises(PlacerError, match="--write-shipped only goes with --write"):
        _run(monkeypatch, "--corpus", str(nothing_swept), "--write-shipped")


def test_write_shipped_names_the_shipped_policy_alone(nothing_swept, monkeypatch, tmp_path):
    folder = tmp_path / "policy"
    shutil.copytree(SHIPPED_POLICY_DIR, folder)
    with pytest.raises(PlacerError, match="--write-shipped is for the shipped policy"):
        _run(monkeypatch, "--corpus", str(nothing_swept), "--policy", str(folder), "--write", "--write-shipped")


def test_samples_below_one_are_refused(nothing_swept, monkeypatch):
    with pytest.raises(PlacerError, match="--samples must be at least 1, got 0"):
        _run(monkeypatch, "--corpus", str(nothing_swept), "--samples", "0")


def test_help_says_where_write_writes():
    done = subprocess.run([sys.executable, "-m", "bench.tune_temperature", "--help"], capture_output=True,
                          text=True, timeout=120, cwd=ROOT)
    assert "--write-shipped" in done.stdout and "policy.json" in done.stdout


def test_a_missing_policy_is_one_line_and_exit_1(tmp_path):
    done = subprocess.run([sys.executable, "-m", "bench.tune_temperature", "--policy", str(tmp_path / "nosuch")],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        f"tune_temperature: error: {str(tmp_path / 'nosuch')!r} is not a policy folder "
        "(needs policy.json and weights.npz; make one with `placer pretrain`)"]
