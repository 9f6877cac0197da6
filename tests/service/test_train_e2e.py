"""End to end with the real trainer: ``method: rl`` runs `placer train` as a job and answers its placement.

Skipped while `placer train` is not in the CLI. Small graph, small budget:
this checks the contract between the service and the trainer (arguments,
progress.json, best_placement.json), not learning. Stop/resume and crash
recovery are covered with the stand-in trainer in test_jobs.py and test_server.py.
"""

from __future__ import annotations

import sys

import pytest

from placer import presets
from placer.cli.main import COMMANDS
from placer.placement import Placement
from placer.simulator import Simulator
from placer.synthetic import layered_graph

pytestmark = pytest.mark.skipif("train" not in COMMANDS, reason="placer train is not in this build")

REAL_TRAIN = [sys.executable, "-m", "placer.cli.main", "train"]


def test_rl_placement_through_a_real_training_job(make_client):
    """The job trains, finishes "done", and its best placement is what the simulator says it is."""
    graph = layered_graph(40, seed=1)
    client = make_client(train_command=REAL_TRAIN, max_wait_seconds=300)
    gid = client.post("/v1/graphs", json=graph.to_dict()).json()["id"]
    r = client.post("/v1/placements", json={"graph_id": gid, "cluster": "2gpu", "method": "rl",
                                            "budget_seconds": 5, "seed": 1, "wait_seconds": 300})
    assert r.status_code == 201, r.text
    p = r.json()
    job = client.get(f"/v1/jobs/{p['job_id']}").json()
    assert job["state"] == "done", (job["error"], job["progress"])
    assert p["job_state"] == "done" and set(p["devices"]) == set(graph.names)
    assert set(job["progress"]) >= {"step", "samples", "elapsed_seconds", "best_step_time"}
    assert job["progress"]["best_step_time"] == pytest.approx(p["step_time"])
    simulated = Simulator(graph, presets.get("2gpu")).evaluate(Placement.from_dict(job["result"]))
    assert simulated.step_time == pytest.approx(p["step_time"], rel=1e-9)


def test_every_job_option_is_a_flag_of_placer_train_and_of_the_stand_in():
    """The service passes each set TrainOptions field as --flag-name; the real CLI and the stand-in must know it."""
    import subprocess
    from pathlib import Path

    from placer.cli.main import build_parser
    from service.models import TrainOptions

    train = build_parser()._subparsers._group_actions[0].choices["train"]
    real = {flag for action in train._actions for flag in action.option_strings}
    stand_in = subprocess.run([sys.executable, str(Path(__file__).with_name("fake_train.py")), "--help"],
                              capture_output=True, text=True).stdout
    for name in TrainOptions.model_fields:
        flag = "--" + name.replace("_", "-")
        assert flag in real and flag in stand_in, flag


def test_a_tiny_rl_job_answers_the_best_of_its_starts_and_says_which_it_kept(make_client):
    """One REINFORCE step: the job's result is no slower than the zero-shot answer or the best heuristic, and
    its meta.kept says which start it kept, with the three step times."""
    graph = layered_graph(40, seed=1)
    client = make_client(train_command=REAL_TRAIN, max_wait_seconds=300)
    gid = client.post("/v1/graphs", json=graph.to_dict()).json()["id"]
    r = client.post("/v1/placements", json={"graph_id": gid, "cluster": "2gpu", "method": "rl", "seed": 1,
                                            "budget_seconds": 5, "options": {"steps": 1, "samples": 4},
                                            "wait_seconds": 300})
    assert r.status_code == 201, r.text
    job = client.get(f"/v1/jobs/{r.json()['job_id']}").json()
    assert job["state"] == "done" and job["options"]["init"] == "shipped", (job["error"], job["options"])
    kept = job["result"]["meta"]["kept"]
    times = kept["step_times"]
    assert kept["kept"] in ("zero-shot", "trained", f"heuristic:{kept['heuristic']}") and kept["why"]
    assert times["zero_shot"] is not None and times["heuristic"] is not None
    assert job["result"]["step_time"] <= min(times["zero_shot"], times["heuristic"]) * (1 + 1e-12)
    assert r.json()["step_time"] <= min(times["zero_shot"], times["heuristic"]) * (1 + 1e-12)
