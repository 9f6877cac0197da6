"""`placer.cli.output`: what the commands print."""

from placer.cli.output import race_line


def test_race_line_counts_steps_in_good_english():
    start = {"heuristic": "metis", "heuristic_step_time": 0.2, "best_step_time": 0.1, "elapsed_seconds": 3.0,
             "dropped_after_round": None}
    line = race_line({"starts": [{**start, "steps": 1}, {**start, "steps": 2}]})
    assert "(1 step, 3 s)" in line and "(2 steps, 3 s)" in line


def test_absurd_figures_print_short():
    """A device whose op overhead is 1e308 s printed a step time of 300 digits."""
    from placer.cli.output import human_bytes, human_seconds

    assert human_seconds(1e308) == "1e+308 s" and human_seconds(2.5) == "2.500 s"
    assert human_bytes(1e30) == "9.09e+17 TiB" and human_bytes(3 * 2**40) == "3.0 TiB"
