"""Placement heuristics. Importing this package registers every heuristic placer.

Use `placer.placers.registry.place(name, graph, cluster)`; each module below
registers its placers with `@register`. The learned method ``rl`` lives above,
in `placer.rl`, and registers itself when ``placer.rl`` is imported
(`placer.rl.method`).
"""

from placer.placers import registry  # noqa: F401

# Each placer module is imported here so that it registers itself.
from placer.placers import single, round_robin, expert, metis, heft, cpop, baechi  # noqa: F401,E402
from placer.placers import pipeline_dp  # noqa: F401,E402
