"""`placer place`: one method's placement, written and printed."""

import json
import re

import pytest

from placer.cli.main import main


@pytest.fixture
def graph_file(layered_graph_file):
    return layered_graph_file(60, seed=3)


def test_place_writes_the_placement_contract(graph_file, tmp_path, capsys):
    """-o writes a Placement with a simulated step time and a device for every op."""
    out = tmp_path / "p.json"
    assert main(["place", str(graph_file), "--cluster", "2gpu", "--method", "heft", "-o", str(out)]) == 0
    data = json.loads(out.read_text())
    assert data["method"] == "heft" and data["cluster"] == "2gpu"
    assert len(data["devices"]) == 60
    assert data["step_time"] > 0 and data["oom"] is False
    assert "wrote" in capsys.readouterr().out


def test_place_json_output(graph_file, capsys):
    assert main(["place", str(graph_file), "--cluster", "4gpu", "--method", "round_robin", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert set(data["devices"].values()) == {f"/device:GPU:{i}" for i in range(4)}
    assert data["lower_bound"] <= data["step_time"]


def test_help_lists_every_heuristic(capsys):
    """The help is written by hand (listing the registry would import every placer just to print it)."""
    from placer.placers import registry
    with pytest.raises(SystemExit):
        main(["place", "--help"])
    epilog = capsys.readouterr().out.split("heuristic methods")[1]
    missing = [n for n in registry.names(heuristic_only=True) if f" {n}" not in epilog]
    assert not missing


@pytest.mark.parametrize("argv, message", [
    (["--method", "nope", "--cluster", "2gpu"], "unknown method 'nope'"),
    (["--method", "heft", "--cluster", "nowhere"], "unknown cluster 'nowhere'"),
    (["--method", "heft", "--cluster", "2gpu", "--starts", "3"], "--starts applies to method rl, not 'heft'"),
    (["--method", "rl", "--cluster", "2gpu", "--starts", "9"], "starts must be an integer from 1 to 8"),
    (["--method", "rl", "--cluster", "2gpu", "--starts", "2", "--policy", "shipped"],
     "starts races heuristic warm starts; it does not go with policy"),
    (["--method", "rl", "--cluster", "2gpu", "--policy", "none", "--best-of", "3"],
     "--best-of samples a pre-trained policy's placements; --policy none trains from scratch"),
    (["--method", "rl", "--cluster", "2gpu", "--budget-seconds", "1e400"],
     "option budget_seconds must be a finite number, got inf"),
])
def test_place_bad_input_is_one_line(graph_file, capsys, argv, message):
    assert main(["place", str(graph_file), *argv]) == 1
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_place_refuses_to_write_over_its_own_graph(graph_file, capsys):
    """`-o` naming the input graph overwrote the user's graph with the placement."""
    before = graph_file.read_bytes()
    assert main(["place", str(graph_file), "--cluster", "2gpu", "--method", "single", "-o", str(graph_file)]) == 1
    assert "is this command's input" in capsys.readouterr().err and graph_file.read_bytes() == before


def test_place_missing_graph(tmp_path, capsys):
    assert main(["place", str(tmp_path / "none.json"), "--cluster", "2gpu", "--method", "single"]) == 1
    assert "no such file" in capsys.readouterr().err


def test_refine_seconds_improves_the_placement_and_says_so(graph_file, tmp_path, capsys):
    """--refine-seconds: never slower than the method's own placement; the output names the search."""
    plain, refined = tmp_path / "plain.json", tmp_path / "refined.json"
    argv = ["place", str(graph_file), "--cluster", "4gpu", "--method", "round_robin"]
    assert main([*argv, "-o", str(plain)]) == 0
    assert main([*argv, "-o", str(refined), "--refine-seconds", "5"]) == 0
    out = capsys.readouterr().out
    assert "refined by local search from" in out
    before, after = json.loads(plain.read_text()), json.loads(refined.read_text())
    assert after["step_time"] <= before["step_time"]
    assert after["meta"]["refined"]["start_step_time"] == pytest.approx(before["step_time"])


def test_refine_sweeps_repeats_the_same_placement(graph_file, tmp_path):
    """--refine-sweeps N with generous seconds: the search stops by sweeps, so two runs agree op for op."""
    argv = ["place", str(graph_file), "--cluster", "4gpu", "--method", "round_robin", "--refine-seconds", "60",
            "--refine-sweeps", "2"]
    first, second = tmp_path / "a.json", tmp_path / "b.json"
    assert main([*argv, "-o", str(first)]) == 0 and main([*argv, "-o", str(second)]) == 0
    a, b = json.loads(first.read_text()), json.loads(second.read_text())
    assert a["devices"] == b["devices"] and a["step_time"] == b["step_time"]
    assert a["meta"]["refined"]["sweeps"] <= 2


@pytest.mark.parametrize("argv, message", [
    (["--refine-seconds", "0"], "--refine-seconds must be a positive, finite number"),
    (["--refine-seconds", "nan"], "--refine-seconds must be a positive, finite number"),
    (["--refine-seconds", "inf"], "--refine-seconds must be a positive, finite number"),
    (["--refine-seconds", "1", "--objective", "throughput"], "--refine-seconds refines step time"),
    (["--refine-sweeps", "3"], "--refine-sweeps needs --refine-seconds"),
    (["--refine-seconds", "1", "--refine-sweeps", "0"], "--refine-sweeps must be at least 1"),
])
def test_bad_refine_seconds_are_one_line(graph_file, capsys, argv, message):
    assert main(["place", str(graph_file), "--cluster", "2gpu", "--method", "single", *argv]) == 1
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_rl_with_starts_races_and_says_how_each_start_did(graph_file, capsys):
    """Every start trains at least one step, however small the budget; the output names each one."""
    assert main(["place", str(graph_file), "--cluster", "4gpu", "--method", "rl", "--starts", "2",
                 "--budget-seconds", "2"]) == 0
    out = capsys.readouterr().out
    assert "by rl: step time" in out
    line = next(x for x in out.splitlines() if "raced warm starts: " in x)
    assert len(re.findall(r"\(\d+ steps?, ", line)) == 2 and "not trained" not in line


def test_rl_training_shows_progress_on_stderr_not_in_the_json(graph_file, capsys):
    """Training through `place` says what it does and prints step lines on stderr, as `placer train` does;
    stdout holds the placement JSON alone."""
    assert main(["place", str(graph_file), "--cluster", "2gpu", "--method", "rl", "--budget-seconds", "2",
                 "--json"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["method"] == "rl"
    err = captured.err.splitlines()
    assert "`placer train --out DIR` checkpoints and resumes" in err[0]
    assert any(re.match(r"step 1 [\d.]+/2 s \| \d+ samples/s \| best [\d.]+ \S+ \| mean reward ", x) for x in err)


def test_help_names_train_as_the_resumable_form(capsys):
    with pytest.raises(SystemExit):
        main(["place", "--help"])
    out = capsys.readouterr().out
    assert "placer train GRAPH --cluster C --out DIR" in out and "resumable" in out


def test_place_best_is_the_fastest_candidate_named_best_name(graph_file, tmp_path, capsys):
    """As the service's method best: the contract's method reads best:NAME, and each candidate is listed."""
    out = tmp_path / "p.json"
    assert main(["place", str(graph_file), "--cluster", "4gpu", "--method", "best", "--candidates",
                 "single,heft,metis", "-o", str(out)]) == 0
    text = capsys.readouterr().out
    data = json.loads(out.read_text())
    chosen = data["method"].split(":")[1]
    assert data["method"].startswith("best:") and chosen in ("single", "heft", "metis")
    assert data["meta"]["best_of"] == ["single", "heft", "metis"]
    assert "best of: single" in text and f"by best:{chosen}" in text
    for name in ("single", "heft", "metis"):
        assert main(["place", str(graph_file), "--cluster", "4gpu", "--method", name, "--json"]) == 0
        assert json.loads(capsys.readouterr().out)["step_time"] >= data["step_time"]


@pytest.mark.parametrize("argv, message", [
    (["--method", "heft", "--candidates", "single"], "--candidates applies to method best, not 'heft'"),
    (["--method", "best", "--candidates", "single,rl"], "candidates must be heuristics; 'rl' is learned"),
    (["--method", "best", "--budget-seconds", "3"], "--budget-seconds applies to learned methods (rl), not 'best'"),
])
def test_place_best_bad_input_is_one_line(graph_file, capsys, argv, message):
    assert main(["place", str(graph_file), "--cluster", "2gpu", *argv]) == 1
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
