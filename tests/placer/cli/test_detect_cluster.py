"""`placer detect-cluster` and `placer calibrate` on this machine (no GPU: logical CPUs)."""

from __future__ import annotations

import json

import pytest

from placer.presets import load_cluster


def test_detect_then_calibrate(cli, tmp_path):
    r = cli("detect-cluster", "--cpus", "2", "-o", tmp_path / "mine.json")
    assert r.code == 0, r.err
    mine = load_cluster(str(tmp_path / "mine.json"))
    assert len(mine) == 2 and mine.devices[0].kind == "cpu-local" and mine.devices[0].peak_flops > 0
    r = cli("calibrate", tmp_path / "mine.json", "--copies", "2", "--rounds", "1", "--max-concurrent", "0",
            "-o", tmp_path / "cal.json", "--json", "--quiet")
    assert r.code == 0, r.err
    assert len(json.loads(r.out)["pairs"]) == 2
    cal = load_cluster(str(tmp_path / "cal.json"))
    assert "calibration" in cal.meta and cal.shared_threads == 1


def test_calibrate_refuses_devices_this_machine_lacks(cli, tmp_path):
    r = cli("calibrate", "2x-dgx-a100", "-o", tmp_path / "x.json")
    assert r.code == 1 and "not a local device" in r.err


@pytest.mark.parametrize("flags, message", [
    (["--copies", "0"], "--copies must be from 1 to 10000, got 0"),
    (["--copies", "9" * 20], "--copies must be from 1 to 10000"),
    (["--rounds", "1001"], "--rounds must be from 1 to 1000, got 1001"),
])
def test_calibrate_bounds_its_counts(cli, tmp_path, flags, message):
    """copies x rounds per pair of devices: 10**20 copies ran on for minutes before."""
    r = cli("calibrate", "local:2", "-o", tmp_path / "x.json", *flags)
    assert r.code == 1 and message in r.err and r.err.count("\n") == 1, r.err


@pytest.mark.parametrize("name, message", [("", "--name must not be empty"),
                                           ("4gpu", "--name '4gpu' is a preset's name")])
def test_detect_cluster_refuses_a_name_no_command_could_use(cli, tmp_path, name, message):
    """An empty name wrote a file every command refused; a preset's name had results printed as the preset's."""
    r = cli("detect-cluster", "--name", name, "-o", tmp_path / "x.json")
    assert r.code == 1 and message in r.err and not (tmp_path / "x.json").exists()


def test_detect_cluster_bad_cpus(cli, tmp_path):
    r = cli("detect-cluster", "--cpus", "0", "-o", tmp_path / "x.json")
    assert r.code == 1 and "1 to 64" in r.err
