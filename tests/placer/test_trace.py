"""`placer.trace`: the Chrome trace of a simulated step, checked event by event."""

from __future__ import annotations

import gzip
import json

import jsonschema
import numpy as np
import pytest

from placer import presets
from placer.errors import PlacerError
from placer.simulator import Simulator
from placer.synthetic import layered_graph
from placer.trace import MERGED, chrome_trace, display_trace, memory_timeline, write_trace
from tests.placer.helpers import GB, graph, host_with_switch, op, two_device_cluster

# Required fields of the Trace Event Format (JSON object form), per phase used here.
TRACE_SCHEMA = {
    "type": "object",
    "required": ["traceEvents"],
    "properties": {
        "displayTimeUnit": {"enum": ["ms", "ns"]},
        "traceEvents": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["name", "ph", "pid"],
                "properties": {
                    "name": {"type": "string"},
                    "ph": {"enum": ["X", "C", "M"]},
                    "pid": {"type": "integer"},
                    "tid": {"type": "integer"},
                    "ts": {"type": "number", "minimum": 0},
                    "dur": {"type": "number", "minimum": 0},
                    "cat": {"type": "string"},
                    "args": {"type": "object"},
                },
                "allOf": [
                    {"if": {"properties": {"ph": {"const": "X"}}},
                     "then": {"required": ["ts", "dur", "tid"]}},
                    {"if": {"properties": {"ph": {"const": "C"}}},
                     "then": {"required": ["ts", "args"],
                              "properties": {"args": {"additionalProperties": {"type": "number"},
                                                      "minProperties": 1}}}},
                    {"if": {"properties": {"ph": {"const": "M"}}},
                     "then": {"required": ["args"],
                              "properties": {"name": {"enum": ["process_name", "process_sort_index",
                                                               "thread_name", "thread_sort_index"]}}}},
                ],
            },
        },
    },
}


@pytest.fixture
def hand():
    """Four ops on devices A and B (1 GB/s link, no latency), every time worked out by hand.

    A: a 0-1 s, b 1-3 s, d 5-6 s.   B: c 3-4 s.
    Link A->B carries a's 2 GB output 1-3 s; link B->A carries c's 1 GB 4-5 s.
    """
    g = graph(
        op("a", cost=1.0, out=2e9, params=5e8),
        op("b", ["a"], cost=2.0, out=1e9),
        op("c", ["a"], cost=1.0, out=1e9, params=1e8),
        op("d", ["b", "c"], cost=1.0),
    )
    cluster = two_device_cluster(bandwidth=1e9)
    place = np.array([0, 0, 1, 0])
    return g, cluster, place, Simulator(g, cluster).run(place)


def _by_phase(trace, ph):
    return [e for e in trace["traceEvents"] if e["ph"] == ph]


class TestChromeTrace:
    def test_ops_have_hand_computed_times(self, hand):
        """Each op is one complete event on its device's ops track, at its simulated start and duration."""
        trace = chrome_trace(*hand)
        ops = [(e["name"], e["pid"], e["tid"], e["ts"], e["dur"]) for e in _by_phase(trace, "X")
               if e["cat"] != "transfer"]
        assert ops == [("a", 1, 1, 0.0, 1e6), ("b", 1, 1, 1e6, 2e6), ("c", 2, 1, 3e6, 1e6), ("d", 1, 1, 5e6, 1e6)]

    def test_op_args(self, hand):
        """An op's args carry its name, type, device, FLOPs and bytes."""
        a = next(e for e in _by_phase(chrome_trace(*hand), "X") if e["name"] == "a")
        assert a["cat"] == "Test"
        assert a["args"] == {"name": "a", "type": "Test", "device": "A", "flops": 0.0,
                             "output_bytes": 2e9, "param_bytes": 5e8}

    def test_transfers_on_link_tracks(self, hand):
        """Each transfer is a complete event on its link direction's track, with its bytes."""
        trace = chrome_trace(*hand)
        sends = [(e["name"], e["pid"], e["tid"], e["ts"], e["dur"], e["args"]) for e in _by_phase(trace, "X")
                 if e["cat"] == "transfer"]
        assert sends == [
            ("a", 3, 2, 1e6, 2e6, {"tensor": "a", "from": "A", "to": "B", "bytes": 2e9}),
            ("c", 3, 3, 4e6, 1e6, {"tensor": "c", "from": "B", "to": "A", "bytes": 1e9}),
        ]

    def test_memory_counters(self, hand):
        """Each device's memory counter steps at every allocation and free (weights included)."""
        trace = chrome_trace(*hand)
        counters = [(e["pid"], e["ts"], e["args"]["bytes"]) for e in _by_phase(trace, "C")]
        assert all(e["name"] == "memory" for e in _by_phase(trace, "C"))
        # A: weights 0.5 GB; a 2 GB from 0; b 1 GB from 1; a freed at 3 (b done, send done);
        #    c's copy 1 GB from 4 (its transfer starts); b and the copy freed at 6 (d done).
        # B: weights 0.1 GB; a's copy 2 GB from 1; c 1 GB from 3; the copy freed at 4; c freed at 5 (sent).
        assert counters == [
            (1, 0.0, 2.5e9), (1, 1e6, 3.5e9), (1, 3e6, 1.5e9), (1, 4e6, 2.5e9), (1, 6e6, 0.5e9),
            (2, 0.0, 0.1e9), (2, 1e6, 2.1e9), (2, 3e6, 3.1e9), (2, 4e6, 1.1e9), (2, 5e6, 0.1e9),
        ]
        _, _, _, res = hand
        assert res.peak_memory.tolist() == [3.5e9, 3.1e9]

    def test_metadata_names_every_track(self, hand):
        """Processes are named after devices plus 'links'; threads after their track or link direction."""
        trace = chrome_trace(*hand)
        names = {(e["name"], e["pid"], e["tid"]): e["args"] for e in _by_phase(trace, "M")}
        assert names[("process_name", 1, 0)] == {"name": "A"}
        assert names[("process_name", 2, 0)] == {"name": "B"}
        assert names[("process_name", 3, 0)] == {"name": "links"}
        assert names[("thread_name", 1, 1)] == {"name": "ops"}
        assert names[("thread_name", 3, 2)] == {"name": "A -> B"}
        assert names[("thread_name", 3, 3)] == {"name": "B -> A"}

    def test_exactly_these_events(self, hand):
        """Nothing else is emitted: 4 ops, 2 transfers, 10 counter samples, 12 metadata events."""
        trace = chrome_trace(*hand)
        counts = {ph: len(_by_phase(trace, ph)) for ph in "XCM"}
        assert counts == {"X": 6, "C": 10, "M": 12}
        assert len(trace["traceEvents"]) == 28

    def test_summary(self, hand):
        """otherData carries the step's summary and each device's capacity and peak."""
        other = chrome_trace(*hand, method="hand")["otherData"]
        assert other["step_time"] == 6.0 and other["method"] == "hand" and other["oom"] is False
        assert [(d["name"], d["peak_memory"], d["ops"]) for d in other["devices"]] == [("A", 3.5e9, 3), ("B", 3.1e9, 1)]

    def test_validates_against_event_format(self, hand):
        """The JSON (after a round trip through text) has every field the format requires."""
        trace = json.loads(json.dumps(chrome_trace(*hand)))
        jsonschema.validate(trace, TRACE_SCHEMA)

    def test_large_graph_validates(self):
        """A 300-op graph on 4 GPUs validates too, and every op appears once."""
        g, c = layered_graph(300), presets.get("4gpu")
        place = np.random.default_rng(0).integers(0, len(c), len(g))
        trace = chrome_trace(g, c, place, Simulator(g, c).run(place))
        jsonschema.validate(trace, TRACE_SCHEMA)
        assert sorted(e["name"] for e in _by_phase(trace, "X") if e["cat"] != "transfer") == sorted(g.names)


class TestMemoryTimeline:
    def test_peak_matches_simulator(self):
        """The timeline's maximum is the kernel's peak memory, on random placements."""
        g, c = layered_graph(400, seed=3), presets.get("4gpu")
        sim = Simulator(g, c)
        rng = np.random.default_rng(1)
        for _ in range(10):
            place = rng.integers(0, len(c), len(g))
            res = sim.run(place)
            peaks = [level.max() for _, level in memory_timeline(g, place, res)]
            np.testing.assert_allclose(peaks, res.peak_memory, rtol=1e-12)

    def test_ends_with_weights_only(self):
        """After the step every activation is freed: each device holds only its weights."""
        g, c = layered_graph(200), presets.get("2gpu")
        place = np.random.default_rng(2).integers(0, len(c), len(g))
        res = Simulator(g, c).run(place)
        weights = np.bincount(place, weights=[o.param_bytes for o in g.ops], minlength=len(c))
        ends = [level[-1] for _, level in memory_timeline(g, place, res)]
        np.testing.assert_allclose(ends, weights, atol=1e-3)


class TestWriteTrace:
    def test_plain_and_gzip(self, hand, tmp_path):
        """`.json` is written as text, `.json.gz` gzipped; both read back to the same trace."""
        trace = chrome_trace(*hand)
        plain = json.loads(write_trace(trace, tmp_path / "t.json").read_text())
        packed = json.loads(gzip.decompress(write_trace(trace, tmp_path / "t.json.gz").read_bytes()))
        assert plain == packed == json.loads(json.dumps(trace))

    def test_unwritable(self, hand, tmp_path):
        """A path that cannot be written is a PlacerError naming it."""
        (tmp_path / "file").write_text("")
        with pytest.raises(PlacerError, match="cannot write"):
            write_trace(chrome_trace(*hand), tmp_path / "file" / "t.json")


class TestLinkDirectionTracks:
    """On a topology each link direction that carried traffic is a track, holding each transfer over it."""

    @pytest.fixture
    def gather(self):
        """g0 and g1 (behind one PCIe switch) each send 1 GB to the host at 1 s: the uplink takes them in turn."""
        g = graph(op("a", cost=1, out=GB), op("b", cost=1, out=GB), op("c", ["a", "b"], cost=1))
        cluster = host_with_switch()
        place = np.array([1, 2, 0])
        return g, cluster, place, Simulator(g, cluster).run(place)

    def test_one_track_per_direction_that_carried_traffic(self, gather):
        trace = chrome_trace(*gather)
        tracks = {e["args"]["name"] for e in _by_phase(trace, "M") if e["name"] == "thread_name" and e["pid"] == 5}
        assert tracks == {"g0 -> sw0", "g1 -> sw0", "sw0 -> sock", "sock -> cpu"}

    def test_each_direction_holds_each_transfer_for_its_own_time(self, gather):
        """The uplink (1 GB/s) holds a's copy 1-2 s and b's 2-3 s; the host's memory link (1000 GB/s) 1 ms each."""
        trace = chrome_trace(*gather)
        names = {e["tid"]: e["args"]["name"] for e in _by_phase(trace, "M") if e["name"] == "thread_name"
                 and e["pid"] == 5}
        held = {}
        for e in _by_phase(trace, "X"):
            if e["cat"] == "transfer":
                held.setdefault(names[e["tid"]], []).append((e["name"], e["ts"] / 1e6, e["dur"] / 1e6))
        assert held["sw0 -> sock"] == [("a", 1.0, 1.0), ("b", 2.0, 1.0)]
        assert held["g1 -> sw0"] == [("b", 2.0, 1.0)]
        assert [(n, t) for n, t, _ in held["sock -> cpu"]] == [("a", 1.0), ("b", 2.0)]
        assert [d for _, _, d in held["sock -> cpu"]] == pytest.approx([1e-3, 1e-3])


class TestDisplayTrace:
    """`display_trace`: runs of short ops merged into counted bars, every op still listed."""

    def test_fine_enough_changes_no_bar(self, hand):
        """Every op at least a slot long: the same complete events, and the ops listed in start order."""
        full = chrome_trace(*hand)
        shown = display_trace(full, bars=10)
        assert sorted(map(json.dumps, _by_phase(shown, "X"))) == sorted(map(json.dumps, _by_phase(full, "X")))
        ops = shown["otherData"]["ops"]
        assert ops["name"] == ["a", "b", "c", "d"] and ops["device"] == [0, 0, 1, 0]
        assert ops["start"] == [0.0, 1e6, 3e6, 5e6] and ops["dur"] == [1e6, 2e6, 1e6, 1e6]
        assert shown["otherData"]["display"] == {"bars": 10, "events": 6, "merged_events": 0, "merged_bars": 0}
        assert "ops" not in full["otherData"]  # the full trace is left as it was

    def test_short_ops_merge_and_long_ones_stay(self):
        """A chain of 1,000 1-ms ops and one 1-s op on one device, cut into 10 slots of 0.2 s."""
        ops = [op("x0", cost=1e-3)] + [op(f"x{i}", [f"x{i - 1}"], cost=1e-3) for i in range(1, 1000)]
        g = graph(*ops, op("long", ["x999"], cost=1.0))
        c = two_device_cluster()
        place = np.zeros(len(g), dtype=int)
        shown = display_trace(chrome_trace(g, c, place, Simulator(g, c).run(place)), bars=10)
        bars = _by_phase(shown, "X")
        merged = [e for e in bars if e["cat"] == MERGED]
        assert sum(e["args"]["count"] for e in merged) == 1000 and len(merged) <= 10
        assert all(e["dur"] <= 0.2e6 + 1e-6 and e["name"] == f"{e['args']['count']} ops" for e in merged)
        assert [e["name"] for e in bars if e["cat"] != MERGED] == ["long"]
        assert len(shown["otherData"]["ops"]["name"]) == 1001
        jsonschema.validate(json.loads(json.dumps(shown)), TRACE_SCHEMA)

    def test_memory_keeps_each_slots_peak(self, hand):
        full, shown = chrome_trace(*hand), display_trace(chrome_trace(*hand), bars=2)
        for pid in (1, 2):
            levels = [e["args"]["bytes"] for e in _by_phase(full, "C") if e["pid"] == pid]
            kept = [e["args"]["bytes"] for e in _by_phase(shown, "C") if e["pid"] == pid]
            assert len(kept) <= 2 + 1 and max(kept) == max(levels) and kept[-1] == levels[-1]  # and the last level

    def test_size_is_bounded_at_scale(self):
        """20k ops scattered over 8 GPUs: each track keeps at most 3 events a slot, and the JSON stays within
        the op list's columns plus a bounded number of bars (the web page's payload)."""
        g, c = layered_graph(20_000, seed=4), presets.get("8gpu")
        place = np.random.default_rng(0).integers(1, len(c), len(g))
        full = chrome_trace(g, c, place, Simulator(g, c).run(place))
        bars = 500
        shown = display_trace(full, bars=bars)
        tracks: dict = {}
        for e in _by_phase(shown, "X"):
            tracks[(e["pid"], e["tid"])] = tracks.get((e["pid"], e["tid"]), 0) + 1
        assert max(tracks.values()) <= 3 * bars
        assert all(len([e for e in _by_phase(shown, "C") if e["pid"] == pid]) <= bars + 2 for pid in range(1, 10))
        assert shown["otherData"]["display"]["merged_events"] > 0
        size = len(json.dumps(shown, separators=(",", ":")))
        columns = len(json.dumps(shown["otherData"]["ops"], separators=(",", ":")))
        assert size <= columns + len(tracks) * 3 * bars * 300 + 100_000
        assert size < len(json.dumps(full, separators=(",", ":"))) / 4
