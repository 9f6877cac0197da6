"""`placer compare`: rows for every method, agreeing with `placer simulate`."""

import json

import pytest

from placer.cli.main import main
from placer.placers import registry

FIELDS = {"graph", "cluster", "method", "step_time", "lower_bound", "oom", "place_seconds"}


@pytest.fixture
def graph_files(layered_graph_file):
    return [str(layered_graph_file(n, seed=seed, name=f"g{n}.json.gz")) for n, seed in ((80, 1), (120, 2))]


def test_json_rows_cover_every_graph_cluster_and_method(graph_files, capsys):
    assert main(["compare", *graph_files, "--cluster", "2gpu", "4gpu", "--methods", "all", "--json"]) == 0
    out = capsys.readouterr()
    rows = json.loads(out.out)
    methods = registry.names(heuristic_only=True)
    assert len(rows) == 2 * 2 * len(methods)
    assert all(FIELDS <= set(r) for r in rows)
    assert {(r["graph"], r["cluster"], r["method"]) for r in rows} == {
        (g, c, m) for g in ("layered80", "layered120") for c in ("2gpu", "4gpu") for m in methods}
    assert all(r["lower_bound"] <= r["step_time"] for r in rows)
    assert f"[{len(rows)}/{len(rows)}]" in out.err  # progress on stderr


def test_json_rows_agree_with_simulate(graph_files, tmp_path, capsys):
    """Each compare row's step time is what `placer simulate` says of the same method's placement."""
    g = graph_files[0]
    methods = "single,round_robin,expert,metis,heft,m_topo,m_etf,m_sct"
    assert main(["compare", g, "--cluster", "4gpu", "--methods", methods, "--json", "--quiet"]) == 0
    rows = json.loads(capsys.readouterr().out)
    for row in rows:
        placement = tmp_path / f"{row['method']}.json"
        assert main(["place", g, "--cluster", "4gpu", "--method", row["method"], "-o", str(placement)]) == 0
        capsys.readouterr()
        assert main(["simulate", g, "--cluster", "4gpu", "--placement", str(placement), "--json"]) == 0
        sim = json.loads(capsys.readouterr().out)
        assert sim["step_time"] == pytest.approx(row["step_time"], rel=1e-12)
        assert sim["lower_bound"] == pytest.approx(row["lower_bound"], rel=1e-12)
        assert sim["oom"] == row["oom"]


def test_table_marks_the_winner_and_plot_is_written(graph_files, tmp_path, capsys):
    png = tmp_path / "cmp.png"
    assert main(["compare", graph_files[0], "--cluster", "2gpu-flat", "--methods", "single,heft",
                 "--plot", str(png), "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "heft*" in out and "step_time" in out
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.fixture
def failing_method():
    @registry.register("test_fails", description="always fails", heuristic=False)
    def boom(graph, cluster):
        raise RuntimeError("boom")

    yield "test_fails"
    registry._REGISTRY.pop("test_fails")


def test_one_failing_method_gives_an_error_row_and_exit_1(graph_files, failing_method, capsys):
    assert main(["compare", graph_files[0], "--cluster", "2gpu", "--methods", f"heft,{failing_method},single",
                 "--json"]) == 1
    out = capsys.readouterr()
    rows = json.loads(out.out)
    assert [r["method"] for r in rows] == ["heft", failing_method, "single"]
    assert rows[1]["error"] == "RuntimeError: boom" and rows[1]["step_time"] is None
    assert rows[0]["step_time"] > 0 and rows[2]["step_time"] > 0
    assert "1 of 3 runs failed" in out.err


@pytest.fixture
def interrupted_method():
    """A method stopped by Ctrl-C inside numba-compiled code, which hands the KeyboardInterrupt back in a SystemError."""
    @registry.register("test_interrupted", description="Ctrl-C in compiled code", heuristic=False)
    def stopped(graph, cluster):
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt as e:
            raise SystemError("CPUDispatcher(<function simulate_batch>) returned a result with an exception set") from e

    yield "test_interrupted"
    registry._REGISTRY.pop("test_interrupted")


def test_ctrl_c_inside_compiled_code_stops_the_run(graph_files, interrupted_method, tmp_path, capsys):
    """Not an error row followed by the next method: the run stops as interrupted, the saved rows kept for --resume."""
    saved = tmp_path / "rows.json"
    assert main(["compare", graph_files[0], "--cluster", "2gpu", "--methods", f"heft,{interrupted_method},single",
                 "--save", str(saved), "--quiet"]) == 130
    assert capsys.readouterr().err == "placer compare: interrupted\n"
    assert [r["method"] for r in json.loads(saved.read_text())] == ["heft"]


def test_unknown_method_is_one_line(graph_files, capsys):
    assert main(["compare", graph_files[0], "--cluster", "2gpu", "--methods", "heft,nope"]) == 1
    err = capsys.readouterr().err
    assert "unknown method 'nope'" in err and "or 'all' (every heuristic), 'best'" in err and err.count("\n") == 1


def test_inputs_of_one_name_are_refused(graph_files, layered_graph_file, capsys):
    """Rows are keyed by graph and cluster name: the same input twice, or two files holding graphs of one name,
    would share rows (both starred as winners, or one graph's rows answering for the other on --resume)."""
    assert main(["compare", graph_files[0], graph_files[0], "--cluster", "2gpu", "--methods", "single"]) == 1
    assert "is given twice" in capsys.readouterr().err
    twin = str(layered_graph_file(80, seed=5, name="twin.json.gz"))
    assert main(["compare", graph_files[0], twin, "--cluster", "2gpu", "--methods", "single"]) == 1
    assert "named alike" in capsys.readouterr().err
    assert main(["compare", graph_files[0], "--cluster", "2gpu", "2gpu", "--methods", "single"]) == 1
    assert "cluster '2gpu' is given twice" in capsys.readouterr().err


def test_save_and_resume_run_only_the_missing_rows(graph_files, tmp_path, capsys):
    """An interrupted run resumes: saved rows are kept as they are, missing ones are placed."""
    saved = tmp_path / "rows.json"
    argv = ["compare", graph_files[0], "--cluster", "2gpu", "--methods", "single,heft,metis", "--json", "--quiet",
            "--save", str(saved)]
    assert main(argv) == 0
    full = json.loads(capsys.readouterr().out)
    assert json.loads(saved.read_text()) == full
    partial = full[:2]
    partial[0]["place_seconds"] = 123.0  # a marker: a re-run would overwrite it
    saved.write_text(json.dumps(partial))
    assert main(argv + ["--resume"]) == 0
    resumed = json.loads(capsys.readouterr().out)
    assert [r["method"] for r in resumed] == ["single", "heft", "metis"]
    assert resumed[0]["place_seconds"] == 123.0
    assert resumed[2]["step_time"] == full[2]["step_time"]


def test_resume_places_again_rows_of_a_graph_changed_under_the_same_name(graph_files, layered_graph_file, tmp_path,
                                                                         capsys):
    """Saved rows name their graph's fingerprint: a file rewritten with other ops is not answered from old rows."""
    saved = tmp_path / "rows.json"
    argv = ["compare", graph_files[0], "--cluster", "2gpu", "--methods", "single", "--json", "--quiet",
            "--save", str(saved)]
    assert main(argv) == 0
    rows = json.loads(capsys.readouterr().out)
    rows[0]["place_seconds"] = 123.0  # a marker: a re-run overwrites it
    saved.write_text(json.dumps(rows))
    layered_graph_file(80, seed=7, name="g80.json.gz")  # same name (layered80), other ops
    assert main(argv + ["--resume"]) == 0
    resumed = json.loads(capsys.readouterr().out)
    assert resumed[0]["place_seconds"] != 123.0
    assert resumed[0]["graph_fingerprint"] != rows[0]["graph_fingerprint"]


def test_resume_places_again_rows_of_a_cluster_changed_under_the_same_name(graph_files, tmp_path, capsys):
    """Saved rows name their cluster's fingerprint: a cluster file edited under its name is placed on again."""
    from placer import presets

    spec = presets.get("2gpu").to_dict()
    spec["name"] = "mine"
    cluster_file = tmp_path / "mine.json"
    cluster_file.write_text(json.dumps(spec))
    saved = tmp_path / "rows.json"
    argv = ["compare", graph_files[0], "--cluster", str(cluster_file), "--methods", "single", "--json", "--quiet",
            "--save", str(saved)]
    assert main(argv) == 0
    rows = json.loads(capsys.readouterr().out)
    rows[0]["place_seconds"] = 123.0  # a marker: a re-run overwrites it
    saved.write_text(json.dumps(rows))
    assert main(argv + ["--resume"]) == 0
    assert json.loads(capsys.readouterr().out)[0]["place_seconds"] == 123.0  # unchanged: reused
    for device in spec["devices"]:
        device["memory_bytes"] *= 2
    cluster_file.write_text(json.dumps(spec))
    assert main(argv + ["--resume"]) == 0
    resumed = json.loads(capsys.readouterr().out)
    assert resumed[0]["place_seconds"] != 123.0
    assert resumed[0]["cluster_fingerprint"] != rows[0]["cluster_fingerprint"]


def test_resume_needs_save(graph_files, capsys):
    assert main(["compare", graph_files[0], "--cluster", "2gpu", "--methods", "single", "--resume"]) == 1
    assert "--resume needs --save" in capsys.readouterr().err


def test_rl_runs_beside_the_heuristics_with_its_own_budget(graph_files, capsys, monkeypatch):
    """`--methods all,rl --rl-budget-seconds S`: rl gets S (not its 60 s default); the heuristics get no budget."""
    from placer.placers import comparison

    given = []
    real = comparison.compare
    monkeypatch.setattr(comparison, "compare", lambda *a, **kw: given.append(kw["method_options"]) or real(*a, **kw))
    argv = ["compare", graph_files[0], "--cluster", "2gpu", "--methods", "single,metis,rl",
            "--rl-budget-seconds", "2", "--json", "--quiet"]
    assert main(argv) == 0
    rows = {r["method"]: r for r in json.loads(capsys.readouterr().out)}
    assert set(rows) == {"single", "metis", "rl"}
    assert "error" not in rows["rl"]
    assert rows["rl"]["lower_bound"] <= rows["rl"]["step_time"]
    assert given == [{"rl": {"budget_seconds": 2.0}}]


@pytest.mark.parametrize("extra, message", [
    (["--methods", "single", "--rl-budget-seconds", "5"], "need rl among --methods"),
    (["--methods", "rl", "--rl-budget-seconds", "0"], "--rl-budget-seconds must be a positive number"),
])
def test_rl_options_are_checked(graph_files, capsys, extra, message):
    assert main(["compare", graph_files[0], "--cluster", "2gpu", *extra]) == 1
    assert message in capsys.readouterr().err


def test_rl_with_the_shipped_policy_places_zero_shot(graph_files, capsys):
    argv = ["compare", graph_files[1], "--cluster", "4gpu", "--methods", "rl", "--rl-policy", "shipped",
            "--json", "--quiet"]
    assert main(argv) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert row["method"] == "rl" and "error" not in row and row["step_time"] >= row["lower_bound"]


def test_refine_seconds_refines_every_method_alike(graph_files, tmp_path, capsys):
    """Each row keeps the method's own step time beside the refined one; a resume with another S places again."""
    saved = tmp_path / "rows.json"
    argv = ["compare", graph_files[0], "--cluster", "4gpu", "--methods", "single,round_robin", "--json", "--quiet",
            "--save", str(saved)]
    assert main(argv) == 0
    plain = {r["method"]: r for r in json.loads(capsys.readouterr().out)}
    assert main([*argv, "--refine-seconds", "5", "--resume"]) == 0
    refined = {r["method"]: r for r in json.loads(capsys.readouterr().out)}
    for method, row in refined.items():
        assert row["refine_seconds"] == 5
        assert row["unrefined_step_time"] == pytest.approx(plain[method]["step_time"])
        assert row["step_time"] <= row["unrefined_step_time"]
    assert main([*argv, "--refine-seconds", "5", "--refine-sweeps", "1", "--resume"]) == 0  # another N: placed again
    assert all(r["refine_sweeps"] == 1 for r in json.loads(capsys.readouterr().out))
    assert main(["compare", graph_files[0], "--cluster", "4gpu", "--methods", "single", "--refine-seconds", "1"]) == 0
    assert "unrefined_step_time" in capsys.readouterr().out


@pytest.mark.parametrize("extra, message", [
    (["--refine-seconds", "-1"], "--refine-seconds must be a positive, finite number"),
    (["--refine-seconds", "1", "--objective", "throughput"], "--refine-seconds refines step time"),
    (["--refine-sweeps", "2"], "--refine-sweeps needs --refine-seconds"),
])
def test_bad_refine_seconds(graph_files, capsys, extra, message):
    assert main(["compare", graph_files[0], "--cluster", "2gpu", "--methods", "single", *extra]) == 1
    assert message in capsys.readouterr().err


def test_resume_needs_rows_to_resume(graph_files, tmp_path, capsys):
    argv = ["compare", graph_files[0], "--cluster", "2gpu", "--methods", "single", "--save", str(tmp_path / "r.json")]
    assert main(argv + ["--resume"]) == 1
    assert "no rows to resume" in capsys.readouterr().err and not (tmp_path / "r.json").exists()


def test_resume_refuses_rows_of_graphs_this_run_does_not_place(graph_files, tmp_path, capsys):
    """The file is rewritten with this run's rows, so a resume on other graphs would silently drop the saved ones."""
    save = tmp_path / "r.json"
    assert main(["compare", graph_files[0], "--cluster", "2gpu", "--methods", "single", "--save", str(save),
                 "--quiet"]) == 0
    before = save.read_text()
    capsys.readouterr()
    assert main(["compare", graph_files[1], "--cluster", "2gpu", "--methods", "single", "--save", str(save),
                 "--resume"]) == 1
    err = capsys.readouterr().err
    assert "cannot resume from" in err and "on 2gpu" in err and save.read_text() == before


def test_worlds_report_robustness_in_json_and_table(graph_files, capsys):
    methods = "single,expert,heft"
    argv = ["compare", graph_files[0], "--cluster", "4gpu", "--methods", methods, "--quiet"]
    assert main([*argv, "--json"]) == 0
    plain = json.loads(capsys.readouterr().out)
    assert main([*argv, "--json", "--worlds", "2", "--worlds-seed", "3"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out) == {"rows", "robustness"}
    assert [{k: r[k] for k in FIELDS - {"place_seconds"}} for r in out["rows"]] == [
        {k: r[k] for k in FIELDS - {"place_seconds"}} for r in plain]
    robust = out["robustness"]
    assert [r["method"] for r in robust] == methods.split(",")
    assert all(r["worlds"] == 9 and r["geomean_ratio"] <= r["worst_ratio"] for r in robust)
    winner = min(plain, key=lambda r: r["step_time"])["method"]
    assert next(r for r in robust if r["method"] == winner)["ratios"]["nominal"] == 1.0
    assert main([*argv, "--json", "--worlds", "2", "--worlds-seed", "3"]) == 0
    assert json.loads(capsys.readouterr().out)["robustness"] == robust  # seeded: repeats
    assert main([*argv, "--worlds", "2"]) == 0
    text = capsys.readouterr().out
    assert "geomean_ratio" in text and "worst_world" in text and f"{winner}*" in text


@pytest.mark.parametrize("extra, message", [
    (["--worlds", "0"], "--worlds must be an integer from 1 to 100, got 0"),
    (["--worlds", "1000000"], "--worlds must be an integer from 1 to 100, got 1000000"),
    (["--worlds", "1", "--worlds-seed", "-1"], "--worlds-seed must be a non-negative integer, got -1"),
    (["--worlds", "1", "--save", "SAVE", "--resume"], "cannot take rows from --resume"),
])
def test_bad_worlds(graph_files, tmp_path, capsys, extra, message):
    """Refused before any placing, in one line."""
    extra = [str(tmp_path / "s.json") if a == "SAVE" else a for a in extra]
    (tmp_path / "s.json").write_text("[]")
    assert main(["compare", graph_files[0], "--cluster", "2gpu", "--methods", "single", *extra]) == 1
    assert message in capsys.readouterr().err


def test_best_row_names_the_heuristic_it_chose(graph_files, capsys):
    assert main(["compare", graph_files[0], "--cluster", "2gpu", "--methods", "single,heft,best", "--quiet"]) == 0
    table = capsys.readouterr().out
    assert any(line.split()[2].startswith("best:") for line in table.splitlines()[1:3 + 1])
