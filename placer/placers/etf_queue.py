"""The ready ops of one device column of the m-ETF / m-SCT list scheduler, by earliest start.

The scheduler (`placer.placers.baechi.list_schedule`) starts, at each step,
the (ready op, device) pair with the least key ``(est, -level, topo_rank,
column)``, where ``est = max(value, free)``: ``value`` is when the op's
inputs can be on the device (or, on a device m-SCT keeps for a favourite
child, when they can be on every device) and ``free`` when the device is
free. Scanning every ready op at every step made the scheduler quadratic;
a `ColumnQueue` per device and per kind of value gives the same pair in
O(log n) per change:

- ``waiting``: a heap by ``(value, -level, topo_rank)`` of the ops whose
  value is past ``free``: their key is their value's;
- ``started``: a heap by ``(-level, topo_rank)`` of the ops whose value is
  at most ``free``: their ``est`` is ``free`` itself, so level then
  topological rank decide. ``free`` never decreases (an op starts at or
  after it and takes a non-negative time), so an op moved here stays here
  until its value changes;
- ``parked``: a heap by memory need of the unpinned ops that did not fit the
  device's room when they came to the top; they return when the room grows
  to their need, or when the device has the most room (there every unpinned
  op may go: one that fits nowhere goes to the roomiest device).

An op's value changes only through the scheduler, which then gives it a new
version and pushes it again; entries of an old version, of an op no longer
ready (its version changes when it starts) or of an op pinned to another
device are dropped when they come to the top. Keys compare the floats the
scan compared, so the pair is the same to the last bit.
"""

from __future__ import annotations

from heapq import heappop, heappush


class ColumnQueue:
    """One device column's ready ops for one kind of value; see the module docstring.

    Parameters
    ----------
    column, device : the column's index among the scheduler's devices, and the device.
    version : each op's current version (shared, updated by the scheduler).
    pinned, unit : the device each colocation unit is pinned to (-1: none), and each op's unit (shared).
    need : each op's memory need on a device while its unit is unpinned (output + unit weights).
    """

    __slots__ = ("column", "device", "version", "pinned", "unit", "need", "waiting", "started", "parked")

    def __init__(self, column: int, device: int, version: list[int], pinned: list[int], unit: list[int],
                 need: list[float]):
        self.column, self.device = column, device
        self.version, self.pinned, self.unit, self.need = version, pinned, unit, need
        self.waiting: list[tuple] = []  # (value, -level, topo_rank, op, version)
        self.started: list[tuple] = []  # (-level, topo_rank, value, op, version)
        self.parked: list[tuple] = []  # (need, topo_rank, waiting entry)

    def push(self, value: float, neg_level: float, topo: int, op: int, free: float) -> None:
        """Add op `op` with `value` at its current version; `free`: when the device is free now."""
        if value <= free:
            heappush(self.started, (neg_level, topo, value, op, self.version[op]))
        else:
            heappush(self.waiting, (value, neg_level, topo, op, self.version[op]))

    def best(self, free: float, room: float, roomiest: bool, exclude: int = -1) -> tuple | None:
        """The least ``(est, -level, topo_rank, column, op)`` over the ops that may go to this device.

        `room`: the device's free memory; `roomiest`: whether it has the most
        (then every unpinned op may go); `exclude`: an op to leave out. None
        when no op may go.
        """
        waiting, started, parked = self.waiting, self.started, self.parked
        version = self.version
        if parked:
            while parked and (roomiest or parked[0][0] <= room):
                _, _, e = heappop(parked)
                if version[e[3]] == e[4]:
                    self.push(e[0], e[1], e[2], e[3], free)
        while waiting and waiting[0][0] <= free:
            value, neg_level, topo, op, ver = heappop(waiting)
            if version[op] == ver:
                heappush(started, (neg_level, topo, value, op, ver))
        held = None
        found = None
        while started:
            e = started[0]
            op = e[3]
            if not self._may_go(op, e[4], room, roomiest, started, (e[2], e[0], e[1], op, e[4])):
                continue
            if op == exclude:
                held = heappop(started)
                continue
            found = (free, e[0], e[1], self.column, op)
            break
        if held is not None:
            heappush(started, held)
            held = None
        if found is None:
            while waiting:
                e = waiting[0]
                op = e[3]
                if not self._may_go(op, e[4], room, roomiest, waiting, e):
                    continue
                if op == exclude:
                    held = heappop(waiting)
                    continue
                found = (e[0], e[1], e[2], self.column, op)
                break
            if held is not None:
                heappush(waiting, held)
        return found

    def _may_go(self, op: int, ver: int, room: float, roomiest: bool, heap: list, entry: tuple) -> bool:
        """Whether the top entry of `heap` (op `op`) may go to this device; if not, pop it (parked if only
        memory keeps it out now)."""
        if self.version[op] != ver:
            heappop(heap)
            return False
        p = self.pinned[self.unit[op]]
        if p >= 0:
            if p == self.device:
                return True
            heappop(heap)
            return False
        need = self.need[op]
        if roomiest or need <= room:
            return True
        heappop(heap)
        heappush(self.parked, (need, entry[2], entry))
        return False
