"""A stand-in for `placer train`, used ONLY to test the service's process management.

It follows the `placer train` contract (arguments, ``progress.json`` written
atomically every step, ``best_placement.json``, checkpoint and clean exit on
SIGTERM, ``--resume``) without learning anything: its "placement" puts every
op on the cluster's first device. Standard library only, so it starts fast.

Knobs (environment): ``FAKE_TRAIN_FAIL=1`` exits with an error after one step; ``FAKE_TRAIN_FAIL_ON_RESUME=1``
exits with an error on ``--resume`` before writing any progress (as a corrupt checkpoint does);
``FAKE_TRAIN_IGNORE_TERM=1`` ignores SIGTERM (to test the kill after a timeout);
``FAKE_TRAIN_NO_CHECKPOINT=1`` writes no ``trainer_state.json`` (a run killed before its first checkpoint;
otherwise one is written every step);
``FAKE_TRAIN_STEP_TIME=S`` reports step time S instead of ``1 / (step + 1)``;
``FAKE_TRAIN_HOLD=PATH``: while that file exists the run does not end at its budget (or ``--steps``), so a
test can stop, crash or cancel a run before it ends however slow the machine is (SIGTERM still stops it).
With ``--refine-seconds`` a finished run also writes ``refined_placement.json`` at half the step time.
"""

import argparse
import gzip
import json
import os
import signal
import sys
import time


def write_atomic(path, obj):
    tmp = f"{path}.tmp"
    with open(tmp, "w") as f:
        json.dump(obj, f)
    os.replace(tmp, path)


def step_time(step):
    fixed = os.environ.get("FAKE_TRAIN_STEP_TIME")
    return float(fixed) if fixed else 1.0 / (step + 1)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("graph")
    p.add_argument("--cluster", required=True)
    p.add_argument("--budget-seconds", type=float, required=True)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", required=True)
    p.add_argument("--resume", action="store_true")
    p.add_argument("--steps", type=int, default=None)
    p.add_argument("--samples", type=int, default=4)
    p.add_argument("--groups", type=int, default=None)
    p.add_argument("--warm-start", choices=("heuristic", "none"), default=None)
    p.add_argument("--init", default=None)
    p.add_argument("--warm-start-search", type=float, default=None)
    p.add_argument("--refine-seconds", type=float, default=None)
    p.add_argument("--refine-sweeps", type=int, default=None)
    p.add_argument("--starts", type=int, default=None)
    p.add_argument("--steer", action=argparse.BooleanOptionalAction, default=None)
    a = p.parse_args()
    with gzip.open(a.graph) as f:
        graph = json.load(f)
    with open(a.cluster) as f:
        cluster = json.load(f)
    progress_path = os.path.join(a.out, "progress.json")
    step, elapsed0 = 0, 0.0
    if a.resume and os.environ.get("FAKE_TRAIN_FAIL_ON_RESUME"):  # as a corrupt checkpoint: before any progress
        print("placer train: error: trainer state 'trainer_state.json': not valid JSON", file=sys.stderr)
        return 1
    if a.resume:
        with open(progress_path) as f:
            old = json.load(f)
        step, elapsed0 = old["step"], old["elapsed_seconds"]
    with open(os.path.join(a.out, "starts.log"), "a") as f:
        f.write(f"{'resume' if a.resume else 'start'} {step}\n")
    stop = {"now": False}
    if os.environ.get("FAKE_TRAIN_IGNORE_TERM"):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    else:
        signal.signal(signal.SIGTERM, lambda *_: stop.update(now=True))
    device = cluster["devices"][0]["name"]
    hold = os.environ.get("FAKE_TRAIN_HOLD")

    def held():
        return bool(hold) and os.path.exists(hold)

    t0 = time.monotonic()

    def progress(state, error=None):
        write_atomic(progress_path, {
            "state": state, "step": step, "samples": step * a.samples, "elapsed_seconds": elapsed0 + time.monotonic() - t0,
            "budget_seconds": a.budget_seconds, "best_step_time": step_time(step), "mean_reward": -1.0,
            "entropy": 0.5, "error": error,
        })

    while True:
        step += 1
        write_atomic(os.path.join(a.out, "best_placement.json"), {
            "graph": graph["name"], "cluster": cluster["name"], "method": "rl",
            "devices": {n["name"]: device for n in graph["nodes"]}, "step_time": step_time(step),
            "peak_memory": {}, "oom": False,
        })
        if os.environ.get("FAKE_TRAIN_FAIL"):
            progress("failed", "fake failure for the test")
            print("fake failure for the test", file=sys.stderr)
            return 2
        if stop["now"]:
            progress("interrupted")
            return 130  # as `placer train` (placer.cli.common.EXIT_INTERRUPTED)
        spent = elapsed0 + time.monotonic() - t0 >= a.budget_seconds or (a.steps is not None and step >= a.steps)
        if spent and not held():
            if a.refine_seconds:  # as `placer train --refine-seconds`: a second file, here twice as fast
                write_atomic(os.path.join(a.out, "refined_placement.json"), {
                    "graph": graph["name"], "cluster": cluster["name"], "method": "rl",
                    "devices": {n["name"]: device for n in graph["nodes"]}, "step_time": step_time(step) / 2,
                    "peak_memory": {}, "oom": False, "meta": {"refined": {"moves": 1, "max_sweeps": a.refine_sweeps}},
                })
            progress("done")
            return 0
        progress("running")
        if not os.environ.get("FAKE_TRAIN_NO_CHECKPOINT"):  # as `placer train` every 30 s
            write_atomic(os.path.join(a.out, "trainer_state.json"), {"format": 1, "state": {"step": step}})
        time.sleep(0.05)


if __name__ == "__main__":
    sys.exit(main())
