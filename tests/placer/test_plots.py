"""`placer.plots.gantt_chart`: the simulated step drawn to an image."""

from __future__ import annotations

import numpy as np
import pytest

from placer.errors import PlacerError
from placer.plots import _time_unit, gantt_chart
from placer.simulator import Simulator
from tests.placer.helpers import GB, graph, host_with_switch, op, two_device_cluster

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture
def step():
    g = graph(op("a", out=2e9), op("b", ["a"], cost=2.0, out=1e9), op("c", ["a"], out=1e9), op("d", ["b", "c"]))
    c = two_device_cluster(bandwidth=1e9)
    place = np.array([0, 0, 1, 0])
    return g, c, place, Simulator(g, c).run(place)


class TestGanttChart:
    def test_writes_png(self, step, tmp_path):
        """A PNG image is written where asked, creating its folder."""
        path = gantt_chart(*step, tmp_path / "sub" / "g.png")
        data = path.read_bytes()
        assert data[:8] == PNG_MAGIC and len(data) > 5000

    def test_svg_has_every_row(self, step, tmp_path):
        """The rows are the devices and each link direction that carried a tensor."""
        svg = gantt_chart(*step, tmp_path / "g.svg").read_text()
        for label in ("A -&gt; B", "B -&gt; A", "live GiB"):
            assert label in svg

    def test_topology_rows_are_link_directions(self, tmp_path):
        """On a topology each link direction of the routes used is a row: the switch's uplink among them."""
        g = graph(op("a", out=GB), op("b", out=GB), op("c", ["a", "b"]))
        c = host_with_switch()
        place = np.array([1, 2, 0])
        svg = gantt_chart(g, c, place, Simulator(g, c).run(place), tmp_path / "t.svg").read_text()
        for label in ("g0 -&gt; sw0", "g1 -&gt; sw0", "sw0 -&gt; sock", "sock -&gt; cpu"):
            assert label in svg

    def test_unknown_format(self, step, tmp_path):
        """An image format matplotlib cannot write is a PlacerError naming the file."""
        with pytest.raises(PlacerError, match="g.xyz"):
            gantt_chart(*step, tmp_path / "g.xyz")


def test_time_unit():
    """Spans get the largest unit that keeps them at least 1."""
    assert _time_unit(6.0) == (1.0, "s")
    assert _time_unit(0.0372) == (1e3, "ms")
    assert _time_unit(5e-5) == (1e6, "µs")
