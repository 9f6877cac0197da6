"""`placer.cli.output`: what the commands print."""

from placer.cli.output import race_line


def test_race_line_counts_steps_in_good_english():
    start = {"heuristic": "metis", "heuristic_step_time": 0.2, "best_step_time": 0.1, "elapsed_seconds": 3.0,
             "dropped_after_round": None}
    line = race_line({"starts": [{**start, "steps": 1}, {**start, "steps": 2}]})
    assert "(1 step, 3 s)" in line and "(2 steps, 3 s)" in line
