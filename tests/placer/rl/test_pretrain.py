"""Pre-training over a corpus: the held-out split, imitation, checkpoints and resume, the CLI."""

import copy
import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

from placer import presets
from placer.errors import PlacerError
from placer.graph_io import load_graph, save_graph
from placer.rl import pretrain
from placer.rl.pretrain import environment, loop
from placer.rl.saved_policy import load_policy
from placer.rl.worlds import world_rewards, world_rng
from placer.synthetic import layered_graph

ROOT = Path(__file__).resolve().parents[3]
CORPUS = ROOT / "corpus" / "graphs"


# -- the corpus and its held-out split ----------------------------------------------------------
def test_committed_corpus_holds_out_whole_families():
    folder, manifest = pretrain.read_manifest(CORPUS)
    heldout = set(manifest["heldout_families"])
    train = pretrain.training_entries(manifest)
    held = [e for e in manifest["graphs"] if e["split"] == "heldout"]
    train_families = {e["family"] for e in train}
    assert held and len(train) >= 10 and len(train_families) >= 5
    assert train_families.isdisjoint(heldout)  # disjoint by family, not just by graph
    assert {e["family"] for e in held} <= heldout
    assert all((folder / e["path"]).is_file() for e in manifest["graphs"])
    validation = pretrain.validation_entries(manifest)
    val_families = {e["family"] for e in validation}
    assert validation and val_families.isdisjoint(train_families | heldout)


def test_corpus_script_splits_by_family():
    from corpus import make_corpus
    families = {name: fam for name, (fam, _) in make_corpus.ENTRIES.items()}
    train = {f for f in families.values() if make_corpus.split_of(f) == "train"}
    held = {f for f in families.values() if make_corpus.split_of(f) == "heldout"}
    val = {f for f in families.values() if make_corpus.split_of(f) == "validation"}
    assert held == set(make_corpus.HELDOUT_FAMILIES) and train and not train & held
    assert val == set(make_corpus.VALIDATION_FAMILIES) and not val & (train | held)


def test_a_manifest_that_trains_on_a_heldout_family_is_refused(tmp_path):
    manifest = {"heldout_families": ["densenet"], "graphs": [
        {"name": "a", "family": "densenet", "split": "train", "path": "a.json.gz"}]}
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    _, m = pretrain.read_manifest(tmp_path)
    with pytest.raises(PlacerError, match="held-out"):
        pretrain.training_entries(m)


def test_a_validation_graph_of_a_trained_family_is_refused(tmp_path):
    manifest = {"heldout_families": [], "graphs": [
        {"name": "a", "family": "resnet", "split": "train", "path": "a.json.gz"},
        {"name": "b", "family": "resnet", "split": "validation", "path": "b.json.gz"}]}
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    _, m = pretrain.read_manifest(tmp_path)
    with pytest.raises(PlacerError, match="validation graphs of trained or held-out families"):
        pretrain.validation_entries(m)


def test_graphs_choose_training_graphs_only():
    """--graphs trains a specialist on some training graphs; a validation or held-out graph is never one."""
    _, manifest = pretrain.read_manifest(CORPUS)
    train = pretrain.training_entries(manifest)
    chosen = pretrain.chosen_entries(train, ["resnet50_192_b32", "inception_v3_224_b32"])
    assert [e["name"] for e in chosen] == [e["name"] for e in train
                                           if e["name"] in ("resnet50_192_b32", "inception_v3_224_b32")]
    assert pretrain.chosen_entries(train, None) == train
    for name in ("densenet121_64_b16", "convnexttiny_64_b16", "nope"):
        with pytest.raises(PlacerError, match=f"--graphs: '{name}' is not a training graph of the corpus"):
            pretrain.chosen_entries(train, ["resnet50_192_b32", name])


def test_missing_manifest_is_one_clear_error(tmp_path):
    with pytest.raises(PlacerError, match="no corpus manifest"):
        pretrain.read_manifest(tmp_path)


# -- teachers -----------------------------------------------------------------------------------
def test_canonical_labels_number_identical_devices_by_first_use():
    c = presets.get("8gpu")  # CPU:0 then GPU:0..7 (indices 1..8)
    assert pretrain.canonical_labels(np.array([6, 6, 0, 3, 6, 8]), c).tolist() == [1, 1, 0, 2, 1, 3]


@pytest.mark.parametrize("teachers", [(), ("single", "bogus"), ("rl",)])
def test_teachers_must_be_heuristic_placers(teachers):
    with pytest.raises(PlacerError, match="teachers must be heuristic placers"):
        pretrain.PretrainConfig(teachers=teachers).check()


def test_an_unknown_export_rule_is_refused():
    with pytest.raises(PlacerError, match="export must be one of validation, last"):
        pretrain.PretrainConfig(export="best").check()


def test_the_teacher_is_the_fastest_given_heuristic_once_grouped():
    from placer.placers import registry
    from placer.grouping import group_graph
    from placer.simulator import Simulator

    graph, cluster = layered_graph(80, seed=3), presets.get("4gpu")
    sim = Simulator(graph, cluster)
    grouping = group_graph(graph, cluster, 16, sim.times)
    teachers = ("single", "metis", "m_etf", "pipeline_dp")
    name, devices, step_time = pretrain.teacher_placement(graph, cluster, sim, grouping, teachers)
    assert sim.run_batch(grouping.expand(devices[None, :])).step_time[0] == pytest.approx(step_time)
    for t in teachers:
        grouped = grouping.project(registry.place(t, graph, cluster).assignment(graph, cluster), len(cluster),
                                   weights=sim.times.min(axis=1))
        res = sim.run_batch(grouping.expand(grouped[None, :]))
        assert res.oom[0] or step_time <= res.step_time[0] * (1 + 1e-9), t


def test_a_graph_whose_ops_cost_nothing_is_refused_by_name():
    """Its rewards and teacher ratios would be 0 / 0 (NaN weights after one update); say which graph it is."""
    from placer.graph import Op, OpGraph

    zero = {"cpu": 0.0, "gpu": 0.0}
    free = OpGraph("free", [Op("a", "NoOp", cost=zero), Op("b", "NoOp", ["a"], cost=zero)])
    with pytest.raises(PlacerError, match="graph 'free' on '2gpu': its ops all cost nothing"):
        pretrain.make_environment(free, presets.get("2gpu"), 8, ("single",))


def test_a_refined_teacher_is_never_slower_and_says_so():
    graph, cluster = layered_graph(120, seed=4), presets.get("4gpu")
    plain = pretrain.make_environment(graph, cluster, 16, ("single", "round_robin"))
    refined = pretrain.make_environment(graph, cluster, 16, ("single", "round_robin"), refine_seconds=5.0)
    assert refined.teacher == plain.teacher + "+search"
    assert refined.teacher_step_time <= plain.teacher_step_time and len(refined.teacher_devices) == 16
    res = refined.sim.run_batch(refined.grouping.expand(refined.teacher_devices[None, :]))
    assert res.step_time[0] == pytest.approx(refined.teacher_step_time) and not res.oom[0]
    cached = {"teacher": plain.teacher, "devices": plain.teacher_devices.tolist(), "step_time": plain.teacher_step_time}
    again = pretrain.make_environment(graph, cluster, 16, ("single", "round_robin"), cached, refine_seconds=5.0)
    assert again.teacher.endswith("+search")  # a teacher made without search is not reused
    reused = pretrain.make_environment(graph, cluster, 16, ("single", "round_robin"), cached)
    assert reused.teacher == plain.teacher


@pytest.mark.parametrize("seconds", [-1.0, float("nan"), float("inf")])
def test_refine_teachers_must_be_a_finite_number_of_seconds(seconds):
    with pytest.raises(PlacerError, match="refine_teachers must be"):
        pretrain.PretrainConfig(refine_teachers=seconds).check()


# -- training ----------------------------------------------------------------------------------
CONFIG = pretrain.PretrainConfig(samples=4, groups=12, hidden=16, seed=1, teachers=("single", "metis"))


@pytest.fixture(scope="module")
def session(tmp_path_factory):
    """One small pre-training session (tracing the passes is the slow part, so tests share it)."""
    from placer.rl.numpy_policy import decode
    from placer.rl.saved_policy import weights_of

    envs = [pretrain.make_environment(layered_graph(n, seed=n), presets.get(c), CONFIG.groups, CONFIG.teachers)
            for n in (60, 90) for c in ("2gpu", "4gpu")]
    p = pretrain.Pretrainer(envs, CONFIG)

    def teacher_logp():
        w = weights_of(p.policy)
        return sum(decode(w, e.group_feats, e.device_feats, 1, actions=e.teacher_devices[None, :])[1][0] for e in envs)

    before = teacher_logp()
    p.set_learning_rate(CONFIG.imitation_learning_rate)
    for _ in range(3 * len(envs)):
        p.imitation_step()
    after = teacher_logp()
    row = p.reinforce_learn(p.reinforce_rollout())
    out = tmp_path_factory.mktemp("pretrain")
    reason = pretrain.run(p, out, budget_seconds=p.state.elapsed_seconds + 1.0, name="t", version="9")
    return {"envs": envs, "p": p, "before": before, "after": after, "row": row, "out": out, "reason": reason}


def test_imitation_moves_probability_toward_the_teacher(session):
    assert session["after"] > session["before"] + 1.0
    row = session["row"]
    assert row["phase"] == "reinforce" and np.isfinite(row["loss"]) and row["mean_step_time_ratio"] > 0


def test_world_sigma_takes_half_the_reward_from_a_random_world(session):
    p, envs = session["p"], session["envs"]
    robust = pretrain.Pretrainer(envs, dataclasses.replace(CONFIG, world_sigma=0.5))
    robust.state = copy.deepcopy(p.state)
    env, actions, _, step_time, oom, reward = robust.reinforce_rollout()
    nominal = env.score(actions, CONFIG.oom_penalty)
    np.testing.assert_array_equal(step_time, nominal[0])  # the best placement is still judged in the nominal world
    assert not np.allclose(reward, nominal[2])
    drawn = world_rewards(env.graph, env.cluster, env.sim.times, env.grouping.expand(actions), CONFIG.oom_penalty,
                          world_rng(CONFIG.seed, robust.state.step), 0.5)
    np.testing.assert_allclose(reward, 0.5 * (nominal[2] + drawn))


def test_run_checkpoints_exports_and_resumes(session):
    p, out, envs = session["p"], session["out"], session["envs"]
    assert session["reason"] == "done"
    steps = p.state.step
    assert steps > 3 * len(envs) and (out / "curve.png").is_file() and (out / "history.csv").is_file()
    saved = load_policy(out / pretrain.POLICY_DIR)
    assert saved.name == "t" and saved.version == "9" and saved.groups == 12 and not saved.card["fine_tuned"]
    assert saved.card["trained_on"]["clusters"] == ["2gpu", "4gpu"]
    assert json.loads((out / "progress.json").read_text())["state"] == "done"

    q = pretrain.Pretrainer(envs, CONFIG)
    pretrain.restore(q, out)
    assert q.state.step == steps and q.state.envs == p.state.envs
    for a, b in zip(p.policy.trainable_variables, q.policy.trainable_variables):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    with open(out / "history.csv", "a") as f:
        f.write("1")  # a row cut short inside its step number (a kill while a full buffer was written)
    assert pretrain.run(q, out, budget_seconds=q.state.elapsed_seconds + 0.5, resumed=True) == "done"
    assert q.state.step > steps
    steps_logged = [int(r.split(",")[0]) for r in (out / "history.csv").read_text().splitlines()[1:]]
    # one row per step of both sessions (the fixture's hand-made steps before `run` are not logged)
    assert steps_logged == list(range(steps_logged[0], q.state.step + 1))

    other = pretrain.Pretrainer(envs, pretrain.PretrainConfig(samples=4, groups=12, hidden=16, seed=2,
                                                              teachers=("single", "metis")))
    with pytest.raises(PlacerError, match="other settings"):
        pretrain.restore(other, out)


def test_validation_graphs_choose_the_exported_checkpoint(session, tmp_path, monkeypatch):
    envs = session["envs"]
    train, val = [e for e in envs if len(e.graph) == 60], [e for e in envs if len(e.graph) != 60]
    p = pretrain.Pretrainer(train, CONFIG, validation=val)
    monkeypatch.setattr(loop, "EVAL_EVERY_SECONDS", 0.0)  # evaluate after every step
    monkeypatch.setattr(loop, "CHECKPOINT_EVERY_SECONDS", 0.0)
    assert pretrain.run(p, tmp_path, budget_seconds=600.0, name="t", version="1", max_steps=6) == "done"
    evals = p.state.evals
    assert len(evals) > 3 and all(set(e["validation_ratios"]) == {v.key for v in val} for e in evals)
    scores = [e["validation_geomean_ratio"] for e in evals]
    chosen = evals[int(np.argmin(scores))]  # the first of the fastest
    assert p.exported == {"step": chosen["step"], "validation_geomean_ratio": min(scores)}
    card = load_policy(tmp_path / pretrain.POLICY_DIR).card
    assert card["validation"]["step"] == chosen["step"] == card["trained_on"]["steps"]
    assert card["validation"]["graphs"] == sorted({v.graph.name for v in val})
    sweep = card["sampling"]["geomean_ratio_to_teacher"]  # the finished run chose a sampling temperature
    assert card["sampling"]["chosen_on"] == sorted(v.key for v in val)
    assert sweep[f"{card['sampling']['temperature']:g}"] == min(sweep.values())

    q = pretrain.Pretrainer(train, CONFIG, validation=val)  # a resume keeps the choice
    pretrain.restore(q, tmp_path)
    assert q.exported == p.exported


def test_a_stop_while_the_sampling_temperature_is_chosen_interrupts_the_run(session, tmp_path):
    """Ctrl-C during the final temperature sweep was ignored until the sweep ended (minutes on the corpus)."""
    envs = session["envs"]
    train, val = [e for e in envs if len(e.graph) == 60], [e for e in envs if len(e.graph) != 60]
    p = pretrain.Pretrainer(train, CONFIG, validation=val)
    measured = []
    reason = pretrain.run(p, tmp_path, budget_seconds=600.0, max_steps=2, should_stop=lambda: bool(measured),
                          on_temperature=lambda t, ratio: measured.append(t))
    assert reason == "interrupted" and len(measured) == 1
    assert json.loads((tmp_path / "progress.json").read_text())["state"] == "interrupted"
    assert "sampling" not in load_policy(tmp_path / pretrain.POLICY_DIR).card

    q = pretrain.Pretrainer(train, CONFIG, validation=val)
    pretrain.restore(q, tmp_path)
    assert pretrain.run(q, tmp_path, budget_seconds=600.0, max_steps=2, resumed=True) == "done"
    assert q.state.step == 2 and "sampling" in load_policy(tmp_path / pretrain.POLICY_DIR).card


def test_export_last_exports_the_latest_checkpoint_and_a_resume_may_change_the_rule(session, tmp_path,
                                                                                   monkeypatch):
    from dataclasses import replace

    envs = session["envs"]
    train, val = [e for e in envs if len(e.graph) == 60], [e for e in envs if len(e.graph) != 60]
    last = replace(CONFIG, export="last")
    p = pretrain.Pretrainer(train, last, validation=val)
    monkeypatch.setattr(loop, "EVAL_EVERY_SECONDS", 0.0)
    assert pretrain.run(p, tmp_path, budget_seconds=2.0, name="t", version="1") == "done"
    final = p.state.evals[-1]
    card = load_policy(tmp_path / pretrain.POLICY_DIR).card
    assert card["validation"]["step"] == final["step"] == p.state.step == card["trained_on"]["steps"]
    assert p.exported["validation_geomean_ratio"] == final["validation_geomean_ratio"]

    q = pretrain.Pretrainer(train, CONFIG, validation=val)  # the rule changes no training: resuming is allowed
    pretrain.restore(q, tmp_path)
    assert q.state.step == p.state.step


def test_a_run_can_start_from_a_saved_policy(session, tmp_path):
    from dataclasses import replace

    from placer.rl.saved_policy import weights_of

    envs, saved = session["envs"], load_policy(session["out"] / pretrain.POLICY_DIR)
    config = replace(CONFIG, imitation_fraction=0.0)
    p = pretrain.Pretrainer(envs, config)
    pretrain.start_from(p, saved)
    for k, w in weights_of(p.policy).items():
        np.testing.assert_array_equal(w, saved.weights[k])
    assert pretrain.run(p, tmp_path, budget_seconds=0.5, name="t", version="10") == "done"
    assert p.state.imitation_steps == 0 and p.state.step > 0
    card = load_policy(tmp_path / pretrain.POLICY_DIR).card
    assert card["init"] == {"name": saved.name, "version": saved.version}
    q = pretrain.Pretrainer(envs, config)
    pretrain.restore(q, tmp_path)
    assert q.init == p.init

    wider = pretrain.Pretrainer(envs[:1], replace(CONFIG, hidden=24))
    with pytest.raises(PlacerError, match="other sizes"):
        pretrain.start_from(wider, saved)


def test_a_load_aware_run_starts_from_a_plain_policy_and_fine_tunes(session, tmp_path):
    """Its load weights start at zero (the plain policy's placements), are trained, and the policy it
    exports places zero-shot and fine-tunes; a plain network refuses it."""
    from dataclasses import replace

    from placer.rl.finetune import fine_tuner
    from placer.rl.numpy_policy import decode
    from placer.rl.saved_policy import assign_to, weights_of
    from placer.rl.trainer import TrainConfig, train
    from placer.rl.zero_shot import place_zero_shot

    envs, plain = session["envs"], load_policy(session["out"] / pretrain.POLICY_DIR)
    p = pretrain.Pretrainer(envs, replace(CONFIG, load_aware=True, imitation_fraction=0.5))
    pretrain.start_from(p, plain)
    w = weights_of(p.policy)
    assert not w["load_w"].any()
    for e in envs:
        np.testing.assert_array_equal(decode(w, e.group_feats, e.device_feats, context=e.context)[0],
                                      decode(plain.weights, e.group_feats, e.device_feats)[0])
    assert pretrain.run(p, tmp_path, budget_seconds=1.0, name="t", version="11") == "done"
    saved = load_policy(tmp_path / pretrain.POLICY_DIR)
    assert saved.load_aware and saved.card["load_aware"] and saved.weights["load_w"].any()

    graph, cluster = layered_graph(70, seed=7), presets.get("4gpu")
    zero = place_zero_shot(graph, cluster, saved, samples=4)
    assert zero.meta["policy"]["load_aware"] and np.isfinite(zero.step_time)
    tuner = fine_tuner(graph, cluster, saved, TrainConfig(samples=4, seed=0, jit=False), samples=4)
    assert tuner.config.load_aware and tuner.state.best.step_time == pytest.approx(zero.step_time)
    assert train(tuner, max_steps=3) == "done"
    result = tuner.best_placement()
    assert result.meta["policy"]["fine_tuned"] is (result.meta["found_at_step"] > 0)
    assert result.step_time <= zero.step_time

    with pytest.raises(PlacerError, match="load-aware"):
        assign_to(pretrain.Pretrainer(envs[:1], CONFIG).policy, saved)


@pytest.mark.parametrize("imitation_fraction", [1.0, 0.0], ids=["imitation", "reinforce"])
def test_a_second_ctrl_c_in_a_step_saves_the_weights_and_count_of_one_step(session, tmp_path, imitation_fraction):
    """A second Ctrl-C while step 3 updated the weights raised there, and the checkpoint saved on the way out
    held the weights after 3 updates (Adam's step count says so) with step count 2; now step 3 ends first,
    and the run stops as after one Ctrl-C."""
    import os
    import signal
    from dataclasses import replace

    from placer.cli.common import StopOnSignal

    config = replace(CONFIG, imitation_fraction=imitation_fraction)
    p = pretrain.Pretrainer(session["envs"], config)
    update = p._update

    def then_two_ctrl_c(*args):
        result = update(*args)
        if p.state.step == 2:  # in step 3
            os.kill(os.getpid(), signal.SIGINT)
            os.kill(os.getpid(), signal.SIGINT)
        return result

    p._update = then_two_ctrl_c
    with StopOnSignal() as stop:
        try:
            reason = pretrain.run(p, tmp_path, budget_seconds=600.0, max_steps=6, should_stop=lambda: stop.requested)
        except KeyboardInterrupt:  # how the second Ctrl-C ended it (saving on the way out)
            reason = "raised"
    saved = pretrain.Pretrainer(session["envs"], config)
    pretrain.restore(saved, tmp_path)
    assert (saved.state.step, int(saved.optimizer.t.numpy())) == (3, 3)
    assert reason == "interrupted"
    rows = (tmp_path / "history.csv").read_text().splitlines()[1:]
    assert [int(r.split(",")[0]) for r in rows] == [1, 2, 3]


def test_cli_pretrain_on_a_tiny_corpus(tmp_path, capsys):
    from placer.cli.main import main

    corpus = tmp_path / "corpus"
    corpus.mkdir()
    graphs = []
    splits = {"a": "train", "b": "train", "val": "validation", "held": "heldout"}
    for k, (fam, split) in enumerate(splits.items()):
        g = layered_graph(50 + 10 * k, seed=k)
        save_graph(g, corpus / f"g{k}.json.gz")
        graphs.append({"name": g.name, "family": fam, "split": split, "path": f"g{k}.json.gz"})
    (corpus / "manifest.json").write_text(json.dumps({"heldout_families": ["held"], "graphs": graphs}))
    out = tmp_path / "run"
    args = [str(corpus), "--cluster", "2gpu", "--out", str(out), "--budget-seconds", "2", "--groups", "10",
            "--hidden", "16", "--samples", "4"]
    assert main(["pretrain", *args, "--json"]) == 0
    captured = capsys.readouterr()
    summary = json.loads(captured.out)
    # stderr is no terminal here, so no tqdm bars: plain lines, as a log file gets them
    assert "environments 1/3 (teachers placed)" in captured.err and "imitation step 1 | " in captured.err
    # the greedy ratio is the last evaluation's, and says which step that was (it read as today's)
    assert "greedy/teacher not evaluated yet" in captured.err or " at step 0" in captured.err
    assert summary["graphs"] == 2 and summary["environments"] == 2 and summary["steps"] > 0
    assert summary["validation_graphs"] == 1 and summary["exported"]["step"] <= summary["steps"]
    assert summary["sampling"]["temperature"] == load_policy(out / "policy").sampling_temperature
    assert main(["pretrain", *args]) == 1  # the run exists: --resume or another folder
    assert "--resume" in capsys.readouterr().err
    # --resume needs no flags but the budget: the run's own settings are its defaults
    budget = ["--budget-seconds", f"{summary['elapsed_seconds'] + 1:.1f}"]  # a step more, however slow the first
    assert main(["pretrain", str(corpus), "--cluster", "2gpu", "--out", str(out), "--resume", *budget, "--json"]) == 0
    resumed = json.loads(capsys.readouterr().out)
    assert resumed["steps"] > summary["steps"] and load_policy(out / "policy").groups == 10

    again = tmp_path / "again"  # continue from the policy: its sizes, no imitation
    assert main(["pretrain", str(corpus), "--cluster", "2gpu", "--out", str(again), "--init", str(out / "policy"),
                 "--budget-seconds", "1", "--json"]) == 0
    continued = json.loads(capsys.readouterr().out)
    assert continued["init"] == {"name": "placer-pretrained", "version": "1"} and continued["imitation_steps"] == 0
    assert load_policy(again / "policy").hidden == 16
    kinds = tmp_path / "kinds"  # --kind-groups: the card says so, and a run from that policy keeps it
    assert main(["pretrain", str(corpus), "--cluster", "2gpu", "--out", str(kinds), "--init", str(out / "policy"),
                 "--kind-groups", "--balanced-groups", "--critical-groups", "--budget-seconds", "1", "--json"]) == 0
    assert load_policy(kinds / "policy").kind_groups and not load_policy(again / "policy").kind_groups
    assert load_policy(kinds / "policy").balanced_groups and load_policy(kinds / "policy").critical_groups
    assert all(v["kind_groups"] and v["critical_groups"]
               for v in json.loads((kinds / "teachers.json").read_text()).values())
    assert main(["pretrain", str(corpus), "--cluster", "2gpu", "--out", str(kinds / "on"), "--init",
                 str(kinds / "policy"), "--budget-seconds", "1", "--json"]) == 0
    capsys.readouterr()
    assert load_policy(kinds / "on" / "policy").kind_groups and load_policy(kinds / "on" / "policy").balanced_groups
    assert load_policy(kinds / "on" / "policy").critical_groups

    assert main(["pretrain", str(corpus), "--out", str(tmp_path / "x"), "--init", str(tmp_path)]) == 1
    assert "is not a policy folder" in capsys.readouterr().err

    searched = tmp_path / "searched"  # training pairs' teachers improved by search, validation pairs' not
    assert main(["pretrain", *args[:3], "--out", str(searched), *args[5:], "--refine-teachers", "0.5",
                 "--budget-seconds", "1", "--json"]) == 0
    capsys.readouterr()
    teachers = json.loads((searched / "teachers.json").read_text())
    assert {k: v["teacher"].endswith("+search") for k, v in teachers.items()} == {
        "layered50@2gpu": True, "layered60@2gpu": True, "layered70@2gpu": False}


def test_a_kind_groups_run_places_and_fine_tunes_the_same_groups(tmp_path):
    """``kind_groups`` (with ``balanced_groups`` and ``critical_groups``) groups the host CPU's tiny ops, and
    the critical path, apart in training, and the policy's card carries all three, so
    zero-shot placement and fine-tuning group a graph the way the policy was trained to place it."""
    from dataclasses import replace

    from placer.rl.finetune import fine_tuner
    from placer.grouping import group_graph
    from placer.rl.trainer import TrainConfig
    from placer.rl.zero_shot import place_zero_shot

    graph, cluster = load_graph(Path(__file__).resolve().parents[3] / "graphs" / "rnnlm.json.gz"), presets.get("4gpu")
    config = replace(CONFIG, kind_groups=True, balanced_groups=True, critical_groups=True, load_aware=True)
    env = pretrain.make_environment(graph, cluster, config.groups, config.teachers, kind_groups=True,
                                    balanced_groups=True, critical_groups=True)
    split = group_graph(graph, cluster, config.groups, env.sim.times, split_kinds=True, balanced=True,
                        split_critical=True)
    assert not np.array_equal(split.group_of_op, group_graph(graph, cluster, config.groups, env.sim.times,
                                                             split_kinds=True, balanced=True).group_of_op)
    assert not np.array_equal(split.group_of_op, group_graph(graph, cluster, config.groups, env.sim.times).group_of_op)
    np.testing.assert_array_equal(env.grouping.group_of_op, split.group_of_op)
    p = pretrain.Pretrainer([env], config)
    assert pretrain.run(p, tmp_path, budget_seconds=1.0, name="t", version="1") == "done"
    saved = load_policy(tmp_path / pretrain.POLICY_DIR)
    assert saved.kind_groups and saved.describe()["kind_groups"] and saved.balanced_groups and saved.critical_groups

    zero = place_zero_shot(graph, cluster, saved)
    assert zero.meta["policy"]["kind_groups"] and zero.meta["policy"]["balanced_groups"]
    assert zero.meta["policy"]["critical_groups"]
    assert zero.meta["groups"] == split.num_groups
    tuner = fine_tuner(graph, cluster, saved, TrainConfig(samples=4, seed=0, jit=False), samples=0)
    assert tuner.config.kind_groups and tuner.config.balanced_groups and tuner.config.critical_groups
    np.testing.assert_array_equal(tuner.grouping.group_of_op, split.group_of_op)
    assert tuner.state.best.step_time == pytest.approx(zero.step_time)


def test_teachers_placed_before_an_interrupt_are_kept(tmp_path, capsys, monkeypatch):
    """teachers.json is written as environments are built: a set-up interrupted after the first pair (minutes
    each with --refine-teachers) places only the others when started again."""
    from placer.cli.main import main

    corpus = tmp_path / "corpus"
    corpus.mkdir()
    graphs = []
    for k in range(2):
        g = layered_graph(40 + 10 * k, seed=k)
        save_graph(g, corpus / f"g{k}.json.gz")
        graphs.append({"name": g.name, "family": f"f{k}", "split": "train", "path": f"g{k}.json.gz"})
    (corpus / "manifest.json").write_text(json.dumps({"graphs": graphs}))
    out = tmp_path / "run"
    args = ["pretrain", str(corpus), "--cluster", "2gpu", "--out", str(out), "--budget-seconds", "1", "--groups",
            "8", "--hidden", "8", "--samples", "2"]
    placed, build = [], pretrain.make_environment

    def interrupted_at_the_second(graph, cluster, *rest):
        if len(placed) == 1:
            raise KeyboardInterrupt
        placed.append(graph.name)
        return build(graph, cluster, *rest)

    monkeypatch.setattr(pretrain, "make_environment", interrupted_at_the_second)
    assert main(args) == 130
    capsys.readouterr()
    assert list(pretrain.load_teachers(out)) == ["layered40@2gpu"]
    teacher, searched = pretrain.teacher_placement, []
    monkeypatch.setattr(pretrain, "make_environment", build)
    monkeypatch.setattr(environment, "teacher_placement", lambda graph, *rest: searched.append(graph.name)
                        or teacher(graph, *rest))
    assert main(args) == 0
    assert searched == ["layered50"] and sorted(pretrain.load_teachers(out)) == ["layered40@2gpu", "layered50@2gpu"]


def test_a_cached_teacher_of_other_heuristics_is_placed_again():
    """teachers.json names the heuristics a teacher was the fastest of: another --teachers list places anew."""
    g, c = layered_graph(40, seed=0), presets.get("2gpu")
    env = pretrain.make_environment(g, c, 8, ("single", "metis"))
    cached = {"teacher": "metis", "devices": [1] * len(env.teacher_devices), "step_time": 1.0,
              "teachers": ["single", "metis"]}
    assert pretrain.make_environment(g, c, 8, ("single", "metis"), cached).teacher_step_time == 1.0
    assert pretrain.make_environment(g, c, 8, ("single", "heft"), cached).teacher_step_time != 1.0


def test_cli_pretrain_resume_is_checked_before_the_environments_are_built(tmp_path, capsys):
    """Teachers take minutes on a real corpus: another corpus or clusters, changed graphs or no run at all are
    refused first, from the saved state alone."""
    from placer.cli.main import main

    corpus = tmp_path / "corpus"
    corpus.mkdir()
    g = layered_graph(50, seed=0)
    save_graph(g, corpus / "g.json.gz")
    (corpus / "manifest.json").write_text(json.dumps(
        {"graphs": [{"name": g.name, "family": "a", "split": "train", "path": "g.json.gz"}]}))
    argv = ["pretrain", str(corpus), "--cluster", "2gpu", "--budget-seconds", "1", "--resume", "--out"]

    assert main([*argv, str(tmp_path / "none")]) == 1
    assert "no pre-training run to resume" in capsys.readouterr().err and not (tmp_path / "none").exists()

    out = tmp_path / "run"
    out.mkdir()
    state = {"format": 1, "config": {}, "envs": ["other@2gpu"]}
    (out / pretrain.STATE_FILE).write_text(json.dumps(state))
    assert main([*argv, str(out)]) == 1
    err = capsys.readouterr().err
    assert "made on other graphs or clusters (only in the run: other@2gpu; only here: layered50@2gpu)" in err
    state.update(envs=["layered50@2gpu"], fingerprints={"layered50@2gpu": "0" * 16})
    (out / pretrain.STATE_FILE).write_text(json.dumps(state))
    assert main([*argv, str(out)]) == 1
    assert "other graphs of the same names (layered50" in capsys.readouterr().err
    state.update(fingerprints={"layered50@2gpu": g.fingerprint}, cluster_fingerprints={"2gpu": "0" * 16})
    (out / pretrain.STATE_FILE).write_text(json.dumps(state))
    assert main([*argv, str(out)]) == 1
    assert "other clusters of the same names (2gpu" in capsys.readouterr().err
    assert sorted(p.name for p in out.iterdir()) == [pretrain.STATE_FILE]  # nothing built or written
