import json

import numpy as np
import pytest

from placer import presets
from placer.errors import PlacerError
from placer.graph_io import save_graph
from placer.placers import registry
from placer.placers.common import Problem
from placer.placers.cpop import cpop
from placer.placers.heft import heft
from placer.rl.saved_policy import load_policy
from placer.rl.steering import distinct, steer
from placer.rl.zero_shot import place_zero_shot
from placer.simulator import Simulator
from placer.synthetic import layered_graph


@pytest.fixture(scope="module")
def shipped():
    return load_policy()


def test_heft_offered_one_device_per_op_puts_each_op_there():
    graph, cluster = layered_graph(120, seed=3), presets.get("4gpu")
    rng = np.random.default_rng(0)
    problem = Problem.build(graph, cluster)
    wanted = rng.integers(1, len(cluster), problem.num_units)[problem.unit]  # colocation units kept whole
    offered = np.zeros((len(graph), len(cluster)), dtype=bool)
    offered[np.arange(len(graph)), wanted] = True
    assert np.array_equal(heft(problem, offered=offered).assignment, wanted)


def test_heft_offered_every_device_is_heft():
    graph, cluster = layered_graph(150, seed=1), presets.get("8gpu-nvlink")
    problem = Problem.build(graph, cluster)
    offered = np.ones((len(graph), len(cluster)), dtype=bool)
    assert np.array_equal(heft(problem, offered=offered).assignment, heft(problem).assignment)


def test_cpop_offered_every_device_is_cpop_and_its_critical_path_keeps_its_device():
    graph, cluster = layered_graph(150, seed=4), presets.get("4gpu")
    problem = Problem.build(graph, cluster)
    plain = cpop(problem)
    assert np.array_equal(cpop(problem, offered=np.ones((len(graph), len(cluster)), dtype=bool)).assignment,
                          plain.assignment)
    offered = np.zeros((len(graph), len(cluster)), dtype=bool)
    offered[:, 1] = True  # every op offered GPU 1 alone: the path stays where CPOP puts it
    steered = cpop(problem, offered=offered)
    path_device = cluster.index[plain.notes["critical_path_device"]]
    assert set(steered.assignment.tolist()) <= {1, path_device}
    assert (steered.assignment == path_device).sum() >= plain.notes["critical_path_ops"]


def test_proposals_are_distinct_and_in_order():
    rows = [np.array([0, 1]), np.array([1, 1]), np.array([0, 1]), np.array([2, 2])]
    assert [r.tolist() for r in distinct(rows, 3)] == [[0, 1], [1, 1], [2, 2]]
    assert len(distinct(rows, 2)) == 2


def test_steering_is_never_slower_than_the_answer_it_starts_from():
    graph, cluster = layered_graph(300, seed=2), presets.get("4gpu")
    sim = Simulator(graph, cluster)
    rng = np.random.default_rng(1)
    problem = Problem.build(graph, cluster)
    ranked = [rng.integers(0, len(cluster), problem.num_units)[problem.unit] for _ in range(8)]
    start = sim.run_batch(ranked[0][None]).step_time[0]
    assignment, meta = steer(graph, cluster, sim, ranked, depths=(2, 8))
    assert sim.run_batch(assignment[None]).step_time[0] <= start
    assert meta["unsteered_step_time"] == start and set(meta["schedules"]) == {"heft 2", "cpop 2", "heft 8", "cpop 8"}
    assert meta["chosen"] in (None, *meta["schedules"])
    alone = steer(graph, cluster, sim, ranked[:1])[1]  # one proposal: the answer stands, and says why
    assert alone["schedules"] == {} and "one distinct placement" in alone["not_steered"]


def test_graphs_past_the_size_bound_are_not_steered(monkeypatch):
    from placer.rl import steering as steering_module

    graph, cluster = layered_graph(300, seed=2), presets.get("4gpu")
    sim = Simulator(graph, cluster)
    ranked = [np.zeros(len(graph), dtype=np.int64), np.ones(len(graph), dtype=np.int64)]
    monkeypatch.setattr(steering_module, "MAX_STEERED_OPS", 299)
    assignment, meta = steer(graph, cluster, sim, ranked, depths=(2,))
    assert meta["schedules"] == {} and meta["chosen"] is None and "more than 299 ops" in meta["not_steered"]
    assert np.array_equal(assignment, ranked[0])


def test_a_steered_zero_shot_answer_is_never_slower_and_says_what_steering_gave(shipped):
    graph, cluster = layered_graph(400, seed=5), presets.get("8gpu-nvlink")
    plain = place_zero_shot(graph, cluster, shipped, samples=32)
    steered = place_zero_shot(graph, cluster, shipped, samples=32, steer=True)
    assert steered.step_time <= plain.step_time
    meta = steered.meta["steered"]
    assert meta["unsteered_step_time"] == pytest.approx(plain.step_time)
    assert set(meta["schedules"]) == {f"{s} {d}" for s in ("heft", "cpop") for d in (4, 8, 16)}
    assert "steered" not in plain.meta


def test_on_two_machines_steering_is_judged_on_the_whole_cluster(shipped):
    """The policy places on one machine and folds that over both: the steered answer is folded too, and both
    are compared on the whole cluster, so steering never answers slower than not steering there."""
    graph, cluster = layered_graph(300, seed=3), presets.get("2x-dgx-a100")
    plain = place_zero_shot(graph, cluster, shipped, samples=64)
    steered = place_zero_shot(graph, cluster, shipped, samples=64, steer=True)
    assert "machine" in plain.meta and "machine" in steered.meta
    assert steered.step_time <= plain.step_time
    assert steered.meta["steered"]["unsteered_step_time"] == pytest.approx(plain.step_time)
    assert steered.meta["steered"]["schedules_on"] == steered.meta["machine"]
    if steered.step_time < plain.step_time:
        assert steered.meta["steered"]["chosen"] is not None


def test_steering_is_a_zero_shot_option_of_method_rl(tmp_path, capsys):
    graph, cluster = layered_graph(200), presets.get("2gpu")
    p = registry.place("rl", graph, cluster, policy="shipped", best_of=8, steer=True)
    assert "steered" in p.meta
    for options in ({"policy": "none"}, {"starts": 2}):
        with pytest.raises(PlacerError, match="steer steers the pre-trained policy's answer"):
            registry.place("rl", graph, cluster, steps=1, steer=True, **options)

    from placer.cli.main import main

    path = tmp_path / "g.json.gz"
    save_graph(graph, path)
    assert main(["place", str(path), "--cluster", "2gpu", "--method", "rl", "--policy", "shipped", "--best-of", "8",
                 "--steer", "--json"]) == 0
    assert "steered" in json.loads(capsys.readouterr().out)["meta"]
    assert main(["place", str(path), "--cluster", "2gpu", "--method", "rl", "--policy", "shipped", "--best-of", "8",
                 "--steer"]) == 0
    assert "steered: " in capsys.readouterr().out
    assert main(["place", str(path), "--cluster", "2gpu", "--method", "heft", "--steer"]) == 1
    assert "--steer/--no-steer apply to method rl, not 'heft'" in capsys.readouterr().err
    assert main(["compare", str(path), "--cluster", "2gpu", "--methods", "rl", "--rl-policy", "none",
                 "--rl-steer"]) == 1
    assert "--rl-policy none trains from scratch" in capsys.readouterr().err
    assert main(["compare", str(path), "--cluster", "2gpu", "--methods", "heft", "--rl-steer"]) == 1
    assert "need rl among --methods" in capsys.readouterr().err
    assert main(["train", str(path), "--cluster", "2gpu", "--init", "none", "--steer", "--out",
                 str(tmp_path / "run")]) == 1
    assert "--init none trains from scratch" in capsys.readouterr().err


def test_the_answer_steers_unless_told_not_to():
    from placer.rl.steering import steers

    assert steers(None) and steers(True) and not steers(False)


def test_method_rl_answers_zero_shot_steered_by_default(shipped):
    graph, cluster = layered_graph(300, seed=1), presets.get("8gpu-nvlink")
    default = registry.place("rl", graph, cluster, policy="shipped", best_of=16)
    assert default.meta["steered"]["chosen"] is not None
    own = registry.place("rl", graph, cluster, policy="shipped", best_of=16, steer=False)
    assert "steered" not in own.meta and own.step_time > default.step_time


def test_placer_train_steers_a_fine_tunes_start_unless_told_not_to(tmp_path, monkeypatch):
    from placer.cli.main import main
    from placer.rl import steering as steering_module

    path = tmp_path / "g.json.gz"
    save_graph(layered_graph(60, seed=3), path)
    calls = []
    real = steering_module.steer
    monkeypatch.setattr(steering_module, "steer", lambda *a, **kw: calls.append(1) or real(*a, **kw))
    argv = ["train", str(path), "--cluster", "2gpu", "--steps", "1", "--samples", "8", "--json"]
    assert main(argv + ["--out", str(tmp_path / "default")]) == 0 and len(calls) == 1
    assert main(argv + ["--out", str(tmp_path / "plain"), "--no-steer"]) == 0 and len(calls) == 1
    assert main(argv + ["--out", str(tmp_path / "scratch"), "--init", "none"]) == 0 and len(calls) == 1
    short = argv + ["--budget-seconds", "10"]
    assert main(short + ["--out", str(tmp_path / "short")]) == 0 and len(calls) == 2


def test_a_fine_tune_with_steer_starts_from_the_steered_answer(shipped):
    from placer.rl.finetune import fine_tuner
    from placer.rl.trainer import TrainConfig

    graph, cluster = layered_graph(300, seed=1), presets.get("8gpu-nvlink")
    answer = place_zero_shot(graph, cluster, shipped, samples=16, steer=True)
    assert answer.meta["steered"]["chosen"] is not None  # steering beat the policy's own answer here
    start = fine_tuner(graph, cluster, shipped, TrainConfig(), samples=16, steer=True).state.warm_start
    assert start["start_step_time"] == pytest.approx(answer.step_time) and "steered op by op" in start["start"]
    plain = fine_tuner(graph, cluster, shipped, TrainConfig(), samples=16).state.warm_start
    assert plain["start_step_time"] > start["start_step_time"]
