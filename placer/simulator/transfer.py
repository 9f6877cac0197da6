"""What one tensor's crossing between two devices costs: the link-cost formula, written once.

The simulator's event loop (`kernel`), the pipelined load of `placer.objectives`
and the load search of `placer.placers.load_search` all charge a crossing with
`transfer_time` (a profiled time, else `link_time`: latency + bytes /
bandwidth), so they cannot disagree on it. `LinkBook` is the simulator's
transfer rule for schedulers that plan transfers one at a time (the list
schedulers of `placer.placers`): routes, a free time per link direction, FIFO.

numba's on-disk cache tracks only the file of the function it compiled, and
`transfer_time` is inlined into its callers: after changing it, delete the
callers' caches (``find placer -name '*.nbi' -delete``), or they keep the old
formula.
"""

from __future__ import annotations

from numba import njit


@njit(cache=True, inline="always")
def link_time(latency, nbytes, bandwidth):
    """Seconds for `nbytes` to cross a link: ``latency + nbytes / bandwidth`` (the formula, written once)."""
    return latency + nbytes / bandwidth


@njit(cache=True, inline="always")
def transfer_time(xfer_time, out_bytes, v, latency, bandwidth, src, dst):
    """Seconds to send op `v`'s output from device `src` to device `dst`.

    The op's own profiled transfer time when it has one (``xfer_time[v] >= 0``,
    as profiled datasets give), else the link's `link_time`.

    Parameters
    ----------
    xfer_time : ``[num_ops]`` profiled transfer time per op, negative where there is none.
    out_bytes : ``[num_ops]`` bytes each op produces.
    v : the producing op.
    latency, bandwidth : ``[num_devices, num_devices]`` per directed link, seconds and bytes per second.
    src, dst : the sending and receiving devices.
    """
    if xfer_time[v] >= 0.0:
        return xfer_time[v]
    return link_time(latency[src, dst], out_bytes[v], bandwidth[src, dst])


_py_link_time = link_time.py_func  # the same formula, called from Python without numba's dispatch


class LinkBook:
    """When each link direction is next free, as a list scheduler books transfers on it.

    The simulator's rule (`placer.simulator.kernel`), for one transfer at a
    time: a transfer from device q to device d follows the route from q to d
    (`placer.topology.Routes`); it starts when its data is ready and every
    direction on the route is free, arrives after the route's summed latency
    + bytes / its bottleneck bandwidth (or the op's profiled transfer time),
    and holds each direction for that direction's own latency + bytes /
    bandwidth from its start (or the profiled time). A scheduler books its
    transfers in the order it plans them, which is FIFO in its own order.
    On a flat cluster each pair's route is its own link, and this is the
    per-link serialisation the schedulers always made, with the same
    arithmetic.

    Plain Python lists: the schedulers calling it are Python loops, and list
    indexing there is several times faster than numpy scalar indexing.

    Parameters
    ----------
    routes : every ordered pair's route (`placer.cluster.Cluster.routes`).
    num_devices : D.
    """

    def __init__(self, routes, num_devices: int):
        D = num_devices
        off, res = routes.offset.tolist(), routes.resource.tolist()
        self.num_devices = D
        self.res_bw = routes.bandwidth.tolist()
        self.res_lat = routes.latency.tolist()
        self.route = [res[off[k]:off[k + 1]] for k in range(D * D)]
        self.route_lat = []
        self.route_bw = []
        for rs in self.route:
            lat, bw = 0.0, float("inf")
            for r in rs:  # in route order, as the kernel sums
                lat += self.res_lat[r]
                if self.res_bw[r] < bw:
                    bw = self.res_bw[r]
            self.route_lat.append(lat)
            self.route_bw.append(bw)
        self.free = [0.0] * len(self.res_bw)
        users: list[set[int]] = [set() for _ in self.res_bw]
        for k, rs in enumerate(self.route):
            for r in rs:
                users[r].add(k // D)
        self.senders_over = [sorted(u) for u in users]
        """Per direction: the devices whose routes (to any device) use it."""

    def start(self, q: int, d: int, ready: float, pending: dict | None = None) -> float:
        """When a transfer from `q` to `d` whose data is ready at `ready` can start.

        `pending`: tentative free times (direction -> time) that override the booked ones.
        """
        s = ready
        free = self.free
        for r in self.route[q * self.num_devices + d]:
            f = free[r] if pending is None else pending.get(r, free[r])
            if f > s:
                s = f
        return s

    def send(self, q: int, d: int, ready: float, nbytes: float, profiled: float = -1.0,
             pending: dict | None = None) -> float:
        """Book a transfer of `nbytes` from `q` to `d` whose data is ready at `ready`; its arrival time.

        `profiled` >= 0 is the op's own transfer time. With `pending`, the
        booking goes into that dict (a tentative plan) and the book is left as
        it was.
        """
        k = q * self.num_devices + d
        s = self.start(q, d, ready, pending)
        free = self.free if pending is None else pending
        if profiled >= 0.0:
            for r in self.route[k]:
                free[r] = s + profiled
            return s + profiled
        for r in self.route[k]:
            free[r] = s + _py_link_time(self.res_lat[r], nbytes, self.res_bw[r])
        return s + _py_link_time(self.route_lat[k], nbytes, self.route_bw[k])
