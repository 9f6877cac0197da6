"""Checkpoints: a resumed run continues exactly where the interrupted one stopped."""

import pytest

from placer.errors import PlacerError
from placer.rl import checkpoint
from placer.rl.trainer import TrainConfig, Trainer, train
from tests.placer.rl.conftest import two_chains


def _config():
    return TrainConfig(samples=8, groups=16, hidden=16, learning_rate=1e-2, warm_start="none", seed=7,
                       jit=False)


def test_resume_gives_the_same_run_as_no_interruption(chains, pair, tmp_path):
    """Rewards, losses and best placement of 3 + 3 resumed steps equal those of 6 steps in one go."""
    whole = Trainer(chains, pair, _config())
    rows_whole = []
    train(whole, max_steps=6, on_step=rows_whole.append)

    first = Trainer(chains, pair, _config())
    rows = []
    train(first, max_steps=3, on_step=rows.append)
    checkpoint.save(first, tmp_path)
    saved = checkpoint.load_state(tmp_path)
    resumed = Trainer(chains, pair, checkpoint.config_of(saved))
    checkpoint.restore(resumed, tmp_path, saved)
    assert resumed.state.step == 3
    train(resumed, max_steps=6, on_step=rows.append)

    assert [r.mean_reward for r in rows] == [r.mean_reward for r in rows_whole]
    assert [r.loss for r in rows] == [r.loss for r in rows_whole]
    assert (resumed.state.best.step_time, resumed.state.best.group_devices, resumed.state.best.step) == (
        whole.state.best.step_time, whole.state.best.group_devices, whole.state.best.step)


def test_resume_refuses_another_graph(pair, tmp_path):
    trainer = Trainer(two_chains(), pair, _config())
    checkpoint.save(trainer, tmp_path)
    other = Trainer(two_chains(length=4), pair, _config())
    with pytest.raises(PlacerError, match=r"it has graph '\w+' \(\d+ ops\), this one '\w+' \(\d+ ops\)"):
        checkpoint.restore(other, tmp_path)


def test_resume_refuses_a_graph_of_the_same_name_and_size_with_other_costs(pair, tmp_path):
    """Name and op count agree, the fingerprint does not: the groups and best placement were made for the first."""
    from placer.graph import OpGraph

    graph = two_chains()
    saved = checkpoint.save(Trainer(graph, pair, _config()), tmp_path)
    assert checkpoint.load_state(tmp_path)["graph_fingerprint"] == graph.fingerprint and saved.exists()
    data = graph.to_dict()
    data["nodes"][0]["flops"] = data["nodes"][0]["flops"] * 2 + 1
    changed = OpGraph.from_dict(data)
    assert (changed.name, len(changed)) == (graph.name, len(graph)) and changed.fingerprint != graph.fingerprint
    with pytest.raises(PlacerError, match="another graph named"):
        checkpoint.check_same_problem(checkpoint.load_state(tmp_path), changed, pair, tmp_path)


def test_resume_refuses_a_cluster_of_the_same_name_with_other_links(pair, tmp_path):
    """A cluster file edited under its name (here every link 10x faster) is not the cluster the run learned on."""
    from placer.cluster import Cluster

    checkpoint.save(Trainer(two_chains(), pair, _config()), tmp_path)
    data = pair.to_dict()
    for link in data["links"] + [data["default_link"]]:
        link["bandwidth"] *= 10
    faster = Cluster.from_dict(data)
    assert faster.name == pair.name and faster.fingerprint != pair.fingerprint
    assert Cluster.from_dict(pair.to_dict()).fingerprint == pair.fingerprint
    with pytest.raises(PlacerError, match="another cluster named"):
        checkpoint.check_same_problem(checkpoint.load_state(tmp_path), two_chains(), faster, tmp_path)


def test_nothing_to_resume(pair, tmp_path):
    assert checkpoint.load_state(tmp_path) is None
    with pytest.raises(PlacerError, match="no training run"):
        checkpoint.restore(Trainer(two_chains(), pair, _config()), tmp_path)


def test_the_warm_start_placement_is_saved_for_the_resume(chains, pair, tmp_path):
    """The best heuristic placement (which shaped the groups of a warm start, and is every run's floor) comes
    back as it was."""
    from dataclasses import replace

    import numpy as np

    trainer = Trainer(chains, pair, replace(_config(), warm_start="heuristic"))
    checkpoint.save(trainer, tmp_path)
    name, devices, step_time = checkpoint.reference_of(checkpoint.load_state(tmp_path))
    assert (name, step_time) == (trainer.reference[0], trainer.reference[2])
    assert np.array_equal(devices, trainer.reference[1])
    cold = Trainer(chains, pair, _config())
    checkpoint.save(cold, tmp_path / "cold")
    assert checkpoint.reference_of(checkpoint.load_state(tmp_path / "cold"))[0] == cold.reference[0]
