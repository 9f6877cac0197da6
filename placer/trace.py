"""A simulated step as a Chrome trace: the timeline Perfetto and ``chrome://tracing`` open.

TensorFlow's and PyTorch's profilers both write the Chrome Trace Event
format, so people who place ops already read step timelines in it. The trace
of one simulated step has:

- one process per device, its ``ops`` thread holding each op as a complete
  event (``ph: "X"``; args: name, type, FLOPs, output and weight bytes) and a
  ``memory`` counter (``ph: "C"``) of the bytes live on the device;
- one ``links`` process with a thread per link direction that carried
  anything, named ``"from -> to"`` after the direction's two ends (devices
  or switches: ``"pcie-switch0 -> socket0"``; on a flat cluster a direction
  is a device pair's own link), holding each transfer as a complete event
  with its bytes for as long as the transfer holds that direction (the
  simulator's rule: a direction's own latency + bytes / bandwidth from the
  transfer's start, so a fast link on a slow route is held briefly; a
  one-hop route's hold is the transfer itself). A transfer over a route of
  three directions appears on three tracks;
- metadata events (``ph: "M"``) naming and ordering the processes and threads.

Timestamps and durations are microseconds (the format's unit). The top-level
``otherData`` carries the step's summary (step time, per-device capacity and
peak), which the service's web page reads.

`display_trace` makes a trace of any size drawable: at 100k ops a full trace
has some 400k events (60 MB of JSON), more than a page can fetch and draw at
interactive speed. It merges runs of consecutive ops too short to see into
one bar per run (with their count) and keeps at most `DISPLAY_BARS` memory
levels per device, and lists every op for the page's table in compact
columns.
"""

from __future__ import annotations

import gzip
import json
import os
from operator import itemgetter
from pathlib import Path
from typing import Any

import numpy as np

from placer.cluster import Cluster
from placer.errors import PlacerError
from placer.fileio import write_atomic
from placer.graph import OpGraph
from placer.simulator.core import SimResult
from placer.simulator.transfer import link_time

US = 1e6
"""Microseconds per second: trace timestamps are in microseconds."""
OPS_TID = 1
"""Thread id of the ops track inside each device's process."""
MEMORY_COUNTER = "memory"
MERGED = "merged"
"""Category (``cat``) of a bar that stands for several consecutive short ops (`display_trace`)."""
DISPLAY_BARS = 2000
"""Default resolution of `display_trace`: the step is cut into this many slots, about a pixel each on a
wide screen; ops shorter than a slot are merged with their neighbours."""


def memory_timeline(graph: OpGraph, assignment: np.ndarray, result: SimResult
                    ) -> list[tuple[np.ndarray, np.ndarray]]:
    """Bytes live on each device over the step, by the simulator's memory rules.

    The rules are those of `placer.simulator.kernel`: a tensor lives on its
    producer's device (holding ``result.held`` bytes there) from the producer's
    start until its last local consumer has finished and its last send has arrived; a received copy lives from its
    transfer's start until its last consumer on that device finishes; weights
    live throughout. At one instant frees come before allocations, and each
    instant is reported once, with the level after everything at it.

    Parameters
    ----------
    graph : the simulated graph.
    assignment : int[num_ops] device index of each op (graph order).
    result : what `Simulator.run(assignment)` returned.

    Returns
    -------
    list of (times, bytes)
        Per device: the instants (seconds, ascending, starting at 0) where the
        level changes and the bytes live from each one on. Its maximum equals
        the simulator's ``peak_memory`` whenever no op or transfer takes zero
        time (the kernel can peak in the middle of a zero-length instant).
    """
    place = np.asarray(assignment, dtype=np.int64)
    n, D = len(graph), len(result.busy)
    out_bytes = np.array([op.output_bytes for op in graph.ops], dtype=np.float64)
    params = np.bincount(place, weights=[op.param_bytes for op in graph.ops], minlength=D)
    p_off, p_idx = graph.predecessors
    consumer = np.repeat(np.arange(n), np.diff(p_off))
    # last_read[u, d]: when the last consumer of u on device d finishes
    last_read = np.full((n, D), -np.inf)
    np.maximum.at(last_read, (p_idx, place[consumer]), result.finish[consumer])
    src_op, dst_dev = result.send_op, result.send_dev
    last_send = np.full(n, -np.inf)
    np.maximum.at(last_send, src_op, result.send_end)
    home = np.arange(n)
    home_free = np.maximum.reduce([result.finish, last_read[home, place], last_send])
    # every tensor copy: (device, alloc time, free time, bytes)
    dev = np.concatenate([place, dst_dev])
    alloc = np.concatenate([result.start, result.send_start])
    free = np.concatenate([home_free, last_read[src_op, dst_dev]])
    home_size = out_bytes if result.held is None else result.held[np.arange(n), place]
    size = np.concatenate([home_size, out_bytes[src_op]])
    timelines = []
    for d in range(D):
        mine = (dev == d) & (size > 0)
        t = np.concatenate([free[mine], alloc[mine]])
        delta = np.concatenate([-size[mine], size[mine]])
        is_alloc = np.concatenate([np.zeros(mine.sum(), bool), np.ones(mine.sum(), bool)])
        order = np.lexsort((is_alloc, t))  # by time; frees first at an instant
        t, level = t[order], np.cumsum(delta[order])
        last_at_instant = np.append(t[1:] != t[:-1], True) if len(t) else np.zeros(0, bool)
        t, level = t[last_at_instant], level[last_at_instant]
        if not len(t) or t[0] > 0.0:
            t, level = np.concatenate([[0.0], t]), np.concatenate([[0.0], level])
        # a cumulative sum can leave -1e-9 where exact arithmetic gives 0
        timelines.append((t, np.maximum(level, 0.0) + params[d]))
    return timelines


def chrome_trace(graph: OpGraph, cluster: Cluster, assignment: np.ndarray, result: SimResult,
                 *, method: str | None = None) -> dict[str, Any]:
    """One simulated step in the Chrome Trace Event format (JSON object form).

    Parameters
    ----------
    graph, cluster : what was simulated.
    assignment : int[num_ops] device index of each op (graph order).
    result : `Simulator(graph, cluster).run(assignment)`.
    method : the placement method, shown in the trace's summary.

    Returns
    -------
    dict
        ``{"traceEvents": [...], "displayTimeUnit": "ms", "otherData": {...}}``,
        ready for `json.dump`.

    Examples
    --------
    >>> from placer import presets
    >>> from placer.graph import Op, OpGraph
    >>> from placer.simulator import Simulator
    >>> g = OpGraph("chain", [Op("a", "X", cost={"gpu": 1.0}), Op("b", "X", ["a"], cost={"gpu": 2.0})])
    >>> c = presets.get("2gpu")
    >>> place = np.array([1, 1])
    >>> trace = chrome_trace(g, c, place, Simulator(g, c).run(place))
    >>> [(e["name"], e["ts"], e["dur"]) for e in trace["traceEvents"] if e["ph"] == "X"]
    [('a', 0.0, 1000000.0), ('b', 1000000.0, 2000000.0)]
    """
    place = np.asarray(assignment, dtype=np.int64)
    devices = cluster.devices
    D = len(devices)
    links_pid = D + 1
    events: list[dict[str, Any]] = []
    for d, device in enumerate(devices):
        pid = d + 1
        events += [
            _meta("process_name", pid, name=device.name),
            _meta("process_sort_index", pid, sort_index=d),
            _meta("thread_name", pid, OPS_TID, name="ops"),
        ]
    events.append(_meta("process_name", links_pid, name="links"))
    events.append(_meta("process_sort_index", links_pid, sort_index=D))

    for i in np.argsort(result.start, kind="stable"):
        op = graph.ops[i]
        d = int(place[i])
        events.append({
            "name": op.name, "cat": op.op, "ph": "X", "pid": d + 1, "tid": OPS_TID,
            "ts": float(result.start[i]) * US, "dur": float(result.finish[i] - result.start[i]) * US,
            "args": {"name": op.name, "type": op.op, "device": devices[d].name, "flops": op.flops,
                     "output_bytes": op.output_bytes, "param_bytes": op.param_bytes},
        })

    names = direction_names(cluster)
    named_links: set[int] = set()
    for r, i, src, dst, t0, held in link_holds(graph, cluster, place, result):
        tid = 1 + r
        if tid not in named_links:
            named_links.add(tid)
            events.append(_meta("thread_name", links_pid, tid, name=names[r]))
            events.append(_meta("thread_sort_index", links_pid, tid, sort_index=tid))
        op = graph.ops[i]
        events.append({
            "name": op.name, "cat": "transfer", "ph": "X", "pid": links_pid, "tid": tid,
            "ts": t0 * US, "dur": held * US,
            "args": {"tensor": op.name, "from": devices[src].name, "to": devices[dst].name,
                     "bytes": op.output_bytes},
        })

    for d, (times, level) in enumerate(memory_timeline(graph, place, result)):
        for t, b in zip(times.tolist(), level.tolist()):
            events.append({"name": MEMORY_COUNTER, "ph": "C", "pid": d + 1, "ts": t * US, "args": {"bytes": b}})

    return {
        "traceEvents": events,
        "displayTimeUnit": "ms",
        "otherData": {
            "graph": graph.name, "cluster": cluster.name, "method": method or "",
            "step_time": result.step_time, "lower_bound": result.lower_bound, "oom": result.oom,
            "bytes_moved": result.bytes_moved,
            "devices": [
                {"name": dv.name, "kind": dv.kind, "memory_bytes": dv.memory_bytes,
                 "peak_memory": float(p), "busy": float(b), "ops": int((place == d).sum())}
                for d, (dv, p, b) in enumerate(zip(devices, result.peak_memory, result.busy))
            ],
        },
    }


def link_holds(graph: OpGraph, cluster: Cluster, assignment: np.ndarray, result: SimResult
               ) -> list[tuple[int, int, int, int, float, float]]:
    """Every transfer's hold on each link direction of its route, by the simulator's rule.

    A transfer holds each direction r on its route from its start for r's own
    latency + bytes / bandwidth (a profiled ``transfer_time``: for that
    time); a one-hop route's hold is the transfer itself, and a shared
    thread pool's copy (in its op's time) holds nothing.

    Returns
    -------
    list of (direction, op, src device, dst device, start s, held s)
        Transfers by start time (ties: op, then destination), each followed
        along its route.
    """
    place = np.asarray(assignment, dtype=np.int64)
    D = len(cluster)
    src_op, dst_dev = result.send_op, result.send_dev
    order = np.lexsort((dst_dev, src_op, result.send_start))
    routes = cluster.routes()
    out = []
    for k in order:
        i, dst = int(src_op[k]), int(dst_dev[k])
        src = int(place[i])
        op = graph.ops[i]
        t0, t1 = float(result.send_start[k]), float(result.send_end[k])
        route = routes.resource[routes.offset[src * D + dst]:routes.offset[src * D + dst + 1]].tolist()
        for r in route:
            if len(route) == 1 or cluster.shared_threads or op.transfer_time is not None:
                held = t1 - t0
            else:
                held = link_time(float(routes.latency[r]), op.output_bytes, float(routes.bandwidth[r]))
            out.append((r, i, src, dst, t0, held))
    return out


def display_trace(trace: dict[str, Any], bars: int = DISPLAY_BARS) -> dict[str, Any]:
    """`trace` (`chrome_trace`'s) made small enough to fetch and draw at any graph size.

    The step is cut into `bars` slots of equal length. On each track (a
    device's ops, a link direction), a run of consecutive events each shorter
    than a slot is drawn as one bar of category `MERGED` from the run's first
    start to its last end, named after its count (``"37 ops"``; args: count,
    busy seconds, its most common type); a run stops before it would span
    more than a slot, so each track keeps at most about ``3 * bars`` events
    however many ops it ran, and an event of a slot or longer is kept as it
    is. Each device's memory counter keeps, per slot, its highest level
    (peaks stay visible), and its last level. Every op is still listed, in compact columns, as
    ``otherData["ops"]``: ``name``, ``type``, ``device`` (index into
    ``otherData["devices"]``), ``start`` and ``dur`` (microseconds) and
    ``output_bytes``, in start order; ``otherData["display"]`` says what was
    merged (``bars``, ``events``, ``merged_events``, ``merged_bars``).

    Parameters
    ----------
    trace : a trace from `chrome_trace`.
    bars : slots the step is cut into (at least 1).

    Returns
    -------
    dict
        A new trace in the same format; `trace` is left as it was.
    """
    bars = max(1, int(bars))
    events = trace["traceEvents"]
    complete = [e for e in events if e["ph"] == "X"]
    end = max((e["ts"] + e["dur"] for e in complete), default=0.0)
    slot = end / bars if end > 0 else 1.0
    tracks: dict[tuple[int, int], list[dict[str, Any]]] = {}
    for e in complete:
        tracks.setdefault((e["pid"], e["tid"]), []).append(e)
    out = [e for e in events if e["ph"] == "M"]
    merged_events = merged_bars = 0
    for track in tracks.values():
        track.sort(key=itemgetter("ts"))
        run: list[dict[str, Any]] = []
        for e in track + [None]:
            if e is not None and e["dur"] < slot and (not run or e["ts"] + e["dur"] - run[0]["ts"] <= slot):
                run.append(e)
                continue
            if len(run) == 1:
                out.append(run[0])
            elif run:
                out.append(_merged_bar(run))
                merged_events += len(run)
                merged_bars += 1
            run = [e] if e is not None and e["dur"] < slot else []
            if e is not None and e["dur"] >= slot:
                out.append(e)
    for pid, counter in _counters(events).items():
        out += _downsampled_counter(pid, counter, slot)
    ops = sorted((e for e in complete if e["cat"] != "transfer"), key=itemgetter("ts"))
    other = dict(trace.get("otherData", {}))
    device_index = {d["name"]: i for i, d in enumerate(other.get("devices", []))}
    other["ops"] = {
        "name": [e["name"] for e in ops], "type": [e["cat"] for e in ops],
        "device": [device_index.get(e["args"].get("device"), e["pid"] - 1) for e in ops],
        "start": [e["ts"] for e in ops], "dur": [e["dur"] for e in ops],
        "output_bytes": [e["args"].get("output_bytes", 0) for e in ops],
    }
    other["display"] = {"bars": bars, "events": len(complete), "merged_events": merged_events,
                        "merged_bars": merged_bars}
    return {**trace, "traceEvents": out, "otherData": other}


def _merged_bar(run: list[dict[str, Any]]) -> dict[str, Any]:
    """One bar standing for a run of consecutive short events of one track."""
    first = run[0]
    types: dict[str, int] = {}
    t1 = busy = 0.0
    for e in run:
        types[e["cat"]] = types.get(e["cat"], 0) + 1
        t1 = max(t1, e["ts"] + e["dur"])
        busy += e["dur"]
    noun = "transfers" if first["cat"] == "transfer" else "ops"
    return {"name": f"{len(run)} {noun}", "cat": MERGED, "ph": "X", "pid": first["pid"], "tid": first["tid"],
            "ts": first["ts"], "dur": t1 - first["ts"],
            "args": {"count": len(run), "busy_us": busy, "top_type": max(types, key=types.get), "what": noun}}


def _counters(events: list[dict[str, Any]]) -> dict[int, list[dict[str, Any]]]:
    """The memory counter events of each process, in time order."""
    out: dict[int, list[dict[str, Any]]] = {}
    for e in events:
        if e["ph"] == "C" and e["name"] == MEMORY_COUNTER:
            out.setdefault(e["pid"], []).append(e)
    for c in out.values():
        c.sort(key=itemgetter("ts"))
    return out


def _downsampled_counter(pid: int, counter: list[dict[str, Any]], slot: float) -> list[dict[str, Any]]:
    """A counter with one level per slot (the slot's highest), each at the slot's first change, then its
    last level where the last change was."""
    if not counter:
        return []
    ts = np.array([e["ts"] for e in counter], dtype=np.float64)
    level = np.array([e["args"]["bytes"] for e in counter], dtype=np.float64)
    k = np.floor(ts / slot)
    first = np.flatnonzero(np.concatenate([[True], k[1:] != k[:-1]]))
    keep = list(zip(ts[first].tolist(), np.maximum.reduceat(level, first).tolist()))
    if keep[-1] != (ts[-1], level[-1]):
        keep.append((float(ts[-1]), float(level[-1])))
    return [{"name": MEMORY_COUNTER, "ph": "C", "pid": pid, "ts": t, "args": {"bytes": b}} for t, b in keep]


def direction_names(cluster: Cluster) -> list[str]:
    """``"from -> to"`` of each link direction of `cluster`'s routes (`placer.topology.Routes`).

    A topology's link k joins nodes a and b: direction 2k is ``"a -> b"``,
    2k + 1 ``"b -> a"``. A flat cluster's direction ``i * D + j`` is the
    pair's own link, named after the two devices.
    """
    if cluster.topology is not None:
        out = []
        for l in cluster.topology.links:
            out += [f"{l.a} -> {l.b}", f"{l.b} -> {l.a}"]
        return out
    names = cluster.device_names
    return [f"{a} -> {b}" for a in names for b in names]


def _meta(kind: str, pid: int, tid: int = 0, **args: Any) -> dict[str, Any]:
    """A metadata event (``ph: "M"``): `kind` names or orders a process or thread."""
    return {"name": kind, "ph": "M", "pid": pid, "tid": tid, "ts": 0, "args": args}


def write_trace(trace: dict[str, Any], path: str | os.PathLike) -> Path:
    """Write a trace atomically; gzip it when `path` ends in ``.gz`` (Perfetto opens both).

    Returns
    -------
    Path
        `path`.

    Raises
    ------
    PlacerError
        If the file cannot be written.
    """
    path = Path(path)
    data = json.dumps(trace, separators=(",", ":"), allow_nan=False).encode()
    if path.suffix == ".gz":
        data = gzip.compress(data, mtime=0)
    try:
        write_atomic(path, data)
    except OSError as e:
        raise PlacerError(f"trace {str(path)!r}: cannot write ({e.strerror or e})") from None
    return path
