"""Zero-shot placement with a saved policy, the shipped policy, and fine-tuning from it."""

import json
import shutil
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from placer import presets
from placer.errors import PlacerError
from placer.graph_io import load_graph, save_graph
from placer.grouping import group_graph
from placer.placers import registry
from placer.rl.saved_policy import SHIPPED_POLICY_DIR, load_policy, save_policy, weights_of
from placer.rl.zero_shot import (DEFAULT_SAMPLES, EXPLORE_SHARE, MIN_DEFAULT_SAMPLES, SAMPLED_OPS,
                                  default_samples, exploring_samples, place_zero_shot, pool_shares)
from placer.simulator import Simulator
from placer.synthetic import layered_graph

ROOT = Path(__file__).resolve().parents[3]
SUITE = sorted((ROOT / "graphs").glob("*.json.gz"))


@pytest.fixture(scope="module")
def shipped():
    return load_policy()


def test_the_shipped_policy_is_small_and_says_what_it_is(shipped):
    assert shipped.path == SHIPPED_POLICY_DIR == load_policy("shipped").path  # as the CLI and service name it
    # four policies of about 0.7 MB (compressed float32 weights) and their cards
    assert sum(f.stat().st_size for f in SHIPPED_POLICY_DIR.rglob("*") if f.is_file()) < 3.5 * 2**20
    d = shipped.describe()
    assert d["name"] and d["version"] and d["fine_tuned"] is False and d["trained_on"]["graphs"]


@pytest.mark.parametrize("path", SUITE, ids=[p.name.split(".")[0] for p in SUITE])
def test_shipped_policy_places_every_benchmark_graph(shipped, path):
    graph = load_graph(path)
    cluster = presets.get("4gpu")
    p = place_zero_shot(graph, cluster, shipped)
    assert set(p.devices) == {op.name for op in graph.ops}
    assert set(p.devices.values()) <= set(cluster.device_names)
    assert np.isfinite(p.step_time) and p.step_time >= p.lower_bound * (1 - 1e-9)
    member = shipped.members[p.meta["pool_member"]]
    assert p.meta["policy"]["name"] == member.name and p.meta["training_steps"] == 0
    assert p.meta["groups"] <= member.groups


def test_the_shipped_policy_pools_three_trained_on_critical_path_groups_and_all_at_half_the_groups(shipped):
    """v7, the critical-path member, the convolutional specialist (suite-scale CNNs alone) and the sequence
    specialist (LSTM language models, NMT and transformers on the NVLink machines)."""
    assert [(m.critical_groups, m.groups) for m in shipped.members] == [(False, 128), (True, 128), (True, 128),
                                                                         (True, 128), (False, 64), (True, 64),
                                                                         (True, 64), (True, 64)]
    assert [p.path for p in shipped.pooled[:3]] == [SHIPPED_POLICY_DIR / name for name in ("critical", "cnn", "seq")]
    assert shipped.pooled[1].card["trained_on"]["graphs"] == sorted(
        ["resnet50_192_b32", "resnet101_160_b16", "inception_v3_224_b32", "resnet50v2_224_b16",
         "inception_v3_256_b16", "mobilenetv2_224_b64"])
    assert {g.split("_")[0] for g in shipped.pooled[2].card["trained_on"]["graphs"]} == {"lstm", "nmt", "transformer"}
    for coarse, fine in zip(shipped.members[4:], shipped.members[:4]):
        assert coarse.weights is fine.weights and coarse.describe()["trained_groups"] == 128
        assert not coarse.pooled and "pool" not in coarse.card and "pool_groups" not in coarse.card


def test_a_pool_answers_the_fastest_of_its_members_answers(shipped):
    """Each member places with its share of the first round's samples and its own seed, alone as in the
    pool; the fastest of them then draws the rest, with the next seed."""
    graph, cluster = load_graph(ROOT / "graphs" / "rnnlm.json.gz"), presets.get("4gpu")
    pooled = place_zero_shot(graph, cluster, shipped, samples=15, seed=3)
    assert len(shipped.members) == 8 and EXPLORE_SHARE == 0.25
    assert [exploring_samples(shipped, k) for k in (40, 15, 4)] == [10, 8, 4]  # at least one each, at most K
    assert exploring_samples(replace(shipped, pooled=()), 15) == 15 and exploring_samples(shipped, 0) == 0
    assert [(k, s) for _, k, s in pool_shares(shipped, 10, 3)] == [(2, 3), (2, 4)] + [(1, s) for s in range(5, 11)]
    shares = pool_shares(shipped, 8, 3)
    alone = [place_zero_shot(graph, cluster, replace(m, pooled=()), samples=k, seed=s) for m, k, s in shares]
    first = min(range(len(alone)), key=lambda j: alone[j].step_time)
    second = place_zero_shot(graph, cluster, replace(shipped.members[first], pooled=()), samples=7, seed=11)
    assert pooled.step_time == min(alone[first].step_time, second.step_time)
    j = pooled.meta["pool_member"]
    assert j == first and pooled.meta["policy"] == alone[j].meta["policy"]
    answer = alone[j] if alone[j].step_time <= second.step_time else second
    assert pooled.devices == answer.devices
    assert (pooled.meta["member_samples"], pooled.meta["member_seed"]) == (answer.meta["member_samples"],
                                                                           answer.meta["member_seed"])
    assert pooled.meta["pool"] == [f"{m.name} v{m.version} ({m.groups} groups)" for m in shipped.members]
    assert alone[j].meta["groups"] <= shipped.members[j].groups


@pytest.mark.parametrize("graph_name,cluster_name", [("rnnlm", "4gpu"), ("inception_v3", "dgx-a100")])
def test_screening_samples_against_the_fastest_so_far_changes_no_answer(shipped, monkeypatch, graph_name,
                                                                         cluster_name):
    """Samples sure to be slower than one already simulated are stopped early (`Screen`); the answer, and
    which sample it was, are those of simulating every sample to its end."""
    graph, cluster = load_graph(ROOT / "graphs" / f"{graph_name}.json.gz"), presets.get(cluster_name)
    screened = place_zero_shot(graph, cluster, shipped, samples=64, seed=1)
    run_batch = Simulator.run_batch
    monkeypatch.setattr(Simulator, "run_batch", lambda self, assignments, cutoff=np.inf: run_batch(self, assignments))
    full = place_zero_shot(graph, cluster, shipped, samples=64, seed=1)
    assert screened.devices == full.devices and screened.step_time == full.step_time
    assert (screened.meta["chosen"], screened.meta["pool_member"]) == (full.meta["chosen"], full.meta["pool_member"])


def test_big_graphs_get_fewer_samples_by_default():
    """Every graph of graphs/ (at most 12,779 ops) gets the full K; 100k ops get what keeps the answer fast."""
    assert default_samples(12_779) == default_samples(SAMPLED_OPS // DEFAULT_SAMPLES) == DEFAULT_SAMPLES
    assert default_samples(SAMPLED_OPS // DEFAULT_SAMPLES + 1) == DEFAULT_SAMPLES - 1
    assert default_samples(93_092) == SAMPLED_OPS // 93_092 < DEFAULT_SAMPLES
    assert default_samples(10**9) == MIN_DEFAULT_SAMPLES and default_samples(0) == DEFAULT_SAMPLES


def test_a_graph_too_big_for_the_policys_groups_is_placed_on_more(shipped):
    """Tensors too big for the members' 64 and 128 groups within the memory cap: the answer comes on 256."""
    graph = layered_graph(800, seed=3)
    needed = float((graph.param_bytes + graph.output_bytes).sum())
    cluster = presets.get("2gpu")
    cluster = replace(cluster, devices=[replace(d, memory_bytes=2 * needed / 150) for d in cluster.devices])
    with pytest.raises(PlacerError, match="ask for more groups"):
        group_graph(graph, cluster, max(m.groups for m in shipped.members), split_kinds=True)
    placement = place_zero_shot(graph, cluster, shipped, samples=8)
    assert placement.meta["groups"] == 256 and set(placement.devices) == {o.name for o in graph.ops}
    assert placement.step_time == Simulator(graph, cluster).evaluate(placement).step_time


def shipped_copy_with(tmp_path, **changes):
    """A copy of the shipped policy folder whose card has `changes`."""
    folder = tmp_path / "policy"
    shutil.copytree(SHIPPED_POLICY_DIR, folder)
    card = json.loads((folder / "policy.json").read_text())
    (folder / "policy.json").write_text(json.dumps({**card, **changes}))
    return folder


@pytest.mark.parametrize("pool", [["../elsewhere"], "critical", [""], ["missing"]])
def test_a_card_with_a_bad_pool_is_refused(tmp_path, pool):
    with pytest.raises(PlacerError, match="pool must be|is not a policy folder"):
        load_policy(shipped_copy_with(tmp_path, pool=pool))


@pytest.mark.parametrize("pool_groups", [64, [0], ["64"], [True]])
def test_a_card_with_bad_pool_groups_is_refused(tmp_path, pool_groups):
    with pytest.raises(PlacerError, match="pool_groups must be a list of positive group counts"):
        load_policy(shipped_copy_with(tmp_path, pool_groups=pool_groups))


def test_greedy_placement_is_deterministic(shipped):
    graph = load_graph(ROOT / "graphs" / "rnnlm.json.gz")
    cluster = presets.get("8gpu")
    a = place_zero_shot(graph, cluster, shipped)
    b = place_zero_shot(graph, cluster, load_policy())
    assert a.devices == b.devices and a.step_time == b.step_time and a.meta["decoding"].startswith("greedy")


def test_best_of_k_is_seeded_and_never_worse_than_greedy(shipped):
    graph, cluster = layered_graph(400, seed=3), presets.get("4gpu")
    greedy = place_zero_shot(graph, cluster, shipped)
    best = place_zero_shot(graph, cluster, shipped, samples=8, seed=5)
    again = place_zero_shot(graph, cluster, shipped, samples=8, seed=5)
    assert best.devices == again.devices
    assert (best.oom, best.step_time) <= (greedy.oom, greedy.step_time)


@pytest.mark.parametrize("load_aware", [False, True], ids=["plain", "load_aware"])
def test_numpy_decoder_matches_the_tensorflow_policy(load_aware):
    import tensorflow as tf

    from placer.rl.features import (NUM_DEVICE_FEATURES, NUM_GROUP_FEATURES, decode_context, device_features,
                                    group_features)
    from placer.grouping import group_graph
    from placer.rl.numpy_policy import decode
    from placer.rl.policy import PlacementPolicy, PolicyConfig
    from placer.simulator import Simulator

    g, c = layered_graph(300), presets.get("4gpu")
    sim = Simulator(g, c)
    grouping = group_graph(g, c, 30, sim.times)
    f, d = group_features(g, c, grouping, sim.times), device_features(c)
    ctx = decode_context(g, c, grouping, sim.times) if load_aware else None
    policy = PlacementPolicy(PolicyConfig(NUM_GROUP_FEATURES, NUM_DEVICE_FEATURES, 16, 16, load_aware), seed=4)
    if load_aware:  # they start at zero; make them matter
        policy.load_w.assign(np.random.default_rng(1).normal(0, 2.0, policy.load_w.shape))
    w = weights_of(policy)
    greedy_tf = policy.decode(tf.constant(f), tf.constant(d), 1, tf.zeros([2], tf.int32), greedy=True, context=ctx)
    acts, logp = decode(w, f, d, 1, context=ctx)
    np.testing.assert_array_equal(acts, greedy_tf.actions.numpy())
    some = np.random.default_rng(0).integers(0, len(c), (3, grouping.num_groups))
    lp_tf = policy.decode(tf.constant(f), tf.constant(d), 3, tf.zeros([2], tf.int32),
                          actions=tf.constant(some, tf.int32), context=ctx).log_prob.numpy()
    np.testing.assert_allclose(decode(w, f, d, 3, actions=some, context=ctx)[1], lp_tf, rtol=1e-4)
    if load_aware:  # the load weights changed the placement, and without them it is the plain policy's
        plain = {k: v for k, v in w.items() if k != "load_w"}
        assert not np.array_equal(acts, decode(plain, f, d, 1)[0])
        np.testing.assert_array_equal(decode(plain, f, d, 1)[0], decode({**w, "load_w": 0 * w["load_w"]}, f, d, 1,
                                                                         context=ctx)[0])


def test_one_pass_decodes_the_greedy_placement_and_the_same_samples_as_two(shipped):
    """`candidate_placements` decodes greedy and samples in one pass (``greedy_rows``): the same rows as a
    greedy pass and a sampling pass, for every pooled member."""
    from placer.rl.numpy_policy import decode
    from placer.rl.zero_shot import candidate_placements, grouped
    from placer.simulator import Simulator

    graph, cluster = load_graph(ROOT / "graphs" / "rnnlm.json.gz"), presets.get("4gpu")
    sim = Simulator(graph, cluster)
    for member in shipped.members:
        _, f, d, ctx = grouped(graph, cluster, sim, member)
        greedy, _ = decode(member.weights, f, d, 1, greedy=True, context=ctx)
        sampled, _ = decode(member.weights, f, d, 12, greedy=False, rng=np.random.default_rng(5),
                            temperature=member.sampling_temperature, context=ctx)
        both = candidate_placements(member, f, d, 12, 5, ctx)
        np.testing.assert_array_equal(both, np.concatenate([greedy, sampled]))
        assert len({tuple(row) for row in both}) > 1


def test_a_policy_saved_with_fewer_load_features_loads_with_zero_weights_for_the_rest(tmp_path):
    """A load-aware policy saved before a load feature was added (v3: four) loads with zero weights for
    it: it places as its four features say, and a TensorFlow network it is copied into (to fine-tune it)
    agrees."""
    import tensorflow as tf

    from placer.rl.features import (NUM_DEVICE_FEATURES, NUM_GROUP_FEATURES, NUM_LOAD_FEATURES, decode_context,
                                    device_features, group_features)
    from placer.grouping import group_graph
    from placer.rl.numpy_policy import decode
    from placer.rl.policy import PlacementPolicy, PolicyConfig
    from placer.rl.saved_policy import assign_to
    from placer.simulator import Simulator

    g, c = layered_graph(300), presets.get("4gpu")
    sim = Simulator(g, c)
    grouping = group_graph(g, c, 30, sim.times)
    f, d, ctx = group_features(g, c, grouping, sim.times), device_features(c), decode_context(g, c, grouping, sim.times)
    policy = PlacementPolicy(PolicyConfig(NUM_GROUP_FEATURES, NUM_DEVICE_FEATURES, 16, 16, True), seed=4)
    policy.load_w.assign(np.random.default_rng(1).normal(0, 2.0, policy.load_w.shape))
    w = weights_of(policy)
    older = {**w, "load_w": w["load_w"][:NUM_LOAD_FEATURES - 1]}
    loaded = load_policy(save_policy(tmp_path / "older", older, {"name": "older", "hidden": 16}))
    padded = np.concatenate([older["load_w"], np.zeros_like(w["load_w"][-1:])])
    np.testing.assert_array_equal(loaded.weights["load_w"], padded)
    acts, _ = decode(loaded.weights, f, d, 1, context=ctx)
    assert not np.array_equal(acts, decode(w, f, d, 1, context=ctx)[0])  # the last feature does matter

    fresh = PlacementPolicy(PolicyConfig(NUM_GROUP_FEATURES, NUM_DEVICE_FEATURES, 16, 16, True), seed=9)
    assign_to(fresh, loaded)
    np.testing.assert_array_equal(fresh.load_w.numpy(), padded)
    greedy_tf = fresh.decode(tf.constant(f), tf.constant(d), 1, tf.zeros([2], tf.int32), greedy=True, context=ctx)
    np.testing.assert_array_equal(acts, greedy_tf.actions.numpy())


def test_registry_method_rl_places_zero_shot_with_a_policy():
    graph, cluster = layered_graph(200), presets.get("2gpu")
    p = registry.place("rl", graph, cluster, policy="shipped")
    assert p.method == "rl" and p.meta["training_steps"] == 0 and p.meta["policy"]["fine_tuned"] is False
    with pytest.raises(PlacerError, match="not a policy folder"):
        registry.place("rl", graph, cluster, policy="/nonexistent/policy")
    with pytest.raises(PlacerError, match="best_of must be an integer"):
        registry.place("rl", graph, cluster, policy="shipped", best_of=-1)


def test_a_policy_for_other_features_is_refused(tmp_path, shipped):
    save_policy(tmp_path, shipped.weights, {**shipped.card, "group_features": 3})
    with pytest.raises(PlacerError, match="pre-train it again"):
        load_policy(tmp_path)


def test_cli_place_zero_shot(tmp_path, capsys):
    from placer.cli.main import main

    path = tmp_path / "g.json.gz"
    save_graph(layered_graph(150), path)
    assert main(["place", str(path), "--cluster", "4gpu", "--method", "rl", "--policy", "shipped", "--best-of", "4",
                 "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["method"] == "rl" and "(4 samples in all)" in out["meta"]["decoding"]
    assert main(["place", str(path), "--cluster", "4gpu", "--method", "metis", "--policy", "shipped"]) == 1
    assert "apply to method rl" in capsys.readouterr().err


def test_cli_train_fine_tunes_from_the_policy(tmp_path, capsys, shipped):
    from placer.cli.main import main

    graph = layered_graph(50, seed=2)  # under 64 groups: no XLA compile (the test stays quick)
    path = tmp_path / "g.json.gz"
    save_graph(graph, path)
    # as the fine-tune starts: the zero-shot answer, steered (a fine-tune's default)
    zero = place_zero_shot(graph, presets.get("2gpu"), shipped, samples=DEFAULT_SAMPLES, steer=True)
    out = tmp_path / "run"
    assert main(["train", str(path), "--cluster", "2gpu", "--init", "shipped", "--steps", "3", "--samples", "4",
                 "--out", str(out), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["warm_start"]["method"] == "policy"
    assert summary["warm_start"]["start_step_time"] == pytest.approx(zero.step_time)
    best = json.loads((out / "best_placement.json").read_text())
    assert best["meta"]["policy"]["name"] == zero.meta["policy"]["name"]  # the pooled policy that placed it
    assert best["meta"]["policy"]["fine_tuned"] is (best["meta"]["found_at_step"] > 0)
    assert best["step_time"] <= zero.step_time * (1 + 1e-9)  # starts from the zero-shot placement
    assert main(["train", str(path), "--cluster", "2gpu", "--out", str(out), "--steps", "5", "--resume"]) == 0
    state = json.loads((out / "trainer_state.json").read_text())
    assert state["state"]["step"] == 5 and state["state"]["warm_start"]["method"] == "policy"


def test_cli_fine_tune_with_the_heuristic_warm_start_is_never_worse_than_either(tmp_path, capsys, shipped):
    from placer.cli.main import main

    graph, cluster = layered_graph(50, seed=3), presets.get("2gpu")
    path = tmp_path / "g.json.gz"
    save_graph(graph, path)
    zero = place_zero_shot(graph, cluster, shipped, samples=DEFAULT_SAMPLES)
    best_heuristic = min(registry.place(name, graph, cluster).step_time
                         for name in registry.names(heuristic_only=True))
    out = tmp_path / "run"
    assert main(["train", str(path), "--cluster", "2gpu", "--init", "shipped", "--warm-start", "heuristic",
                 "--steps", "2", "--samples", "4", "--out", str(out), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["warm_start"]["method"] == "policy"
    best = json.loads((out / "best_placement.json").read_text())
    assert best["meta"]["policy"]["name"] == zero.meta["policy"]["name"]
    assert best["step_time"] <= min(zero.step_time, best_heuristic) * (1 + 1e-9)


def test_on_two_machines_the_policy_places_on_one_and_folds_it_over_both(shipped):
    """More devices than the pool trained on (18 against 9): the answer is its placement on one DGX A100,
    as on `dgx-a100`, or that placement repeated on both machines over a METIS cut, whichever is faster."""
    graph = layered_graph(400, seed=5)
    two, one = presets.get("2x-dgx-a100"), presets.get("dgx-a100")
    p = place_zero_shot(graph, two, shipped, samples=16)
    alone = place_zero_shot(graph, one, shipped, samples=16)
    assert p.step_time == pytest.approx(Simulator(graph, two).evaluate(p).step_time)
    assert p.step_time <= alone.step_time * (1 + 1e-9) and p.meta["machine"] == "/job:worker/replica:0/task:0"
    local = {name: i for i, name in enumerate(one.device_names)}
    on_two = {name: i for i, name in enumerate(two.device_names)}
    if p.meta["spread"] == "on one machine":
        assert {op: on_two[d] for op, d in p.devices.items()} == {op: local[d] for op, d in alone.devices.items()}
    else:  # each op on the same device of its machine as the one-machine placement has it
        assert {op: on_two[d] % 9 for op, d in p.devices.items()} == {op: local[d] for op, d in alone.devices.items()}
        assert {d.split("/device:")[0] for d in p.devices.values()} == {"/job:worker/replica:0/task:0",
                                                                       "/job:worker/replica:0/task:1"}
    assert place_zero_shot(graph, presets.get("8gpu"), shipped, samples=4).meta.get("machine") is None


def test_a_graph_too_big_for_one_machine_is_placed_on_all_of_them(shipped):
    """Both one-machine candidates out of memory: the answer on all 18 devices, which fits, as before the rule."""
    import dataclasses

    from placer.cluster import Cluster

    two = presets.get("2x-dgx-a100")
    small = Cluster("2x-small", [dataclasses.replace(d, memory_bytes=150 * 2**20) if d.kind == "gpu" else d
                                 for d in two.devices], topology=two.topology)
    graph = layered_graph(2000, seed=0)
    machine = small.restricted(small.nodes()[0])
    assert place_zero_shot(graph, machine, shipped, samples=8).oom  # one machine cannot hold it
    p = place_zero_shot(graph, small, shipped, samples=8)
    assert not p.oom and "machine" not in p.meta


def test_machines_of_one_device_are_not_placed_one_at_a_time(shipped):
    """Ten one-GPU machines: placing on one would put the graph on one GPU; they are placed together."""
    from placer.cluster import Cluster, Device
    from placer.rl.zero_shot import on_one_machine
    from placer.topology import Switch, TopoLink, Topology

    gpu = dict(kind="gpu", peak_flops=19.5e12, memory_bandwidth=1.5e12, memory_bytes=40e9)
    devices = [Device(f"/job:worker/replica:0/task:{i}/device:GPU:0", **gpu) for i in range(10)]
    cluster = Cluster("10x1", devices, topology=Topology([Switch("eth", "switch")],
                                                         [TopoLink(d.name, "eth", 12.5e9, 5e-6) for d in devices]))
    assert not on_one_machine(cluster, shipped) and on_one_machine(presets.get("2x-dgx-a100"), shipped)
    assert np.isfinite(place_zero_shot(layered_graph(200), cluster, shipped, samples=4).step_time)
    assert len(cluster.restricted([3])) == 1  # one device needs no link
