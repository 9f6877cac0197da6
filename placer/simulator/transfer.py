"""What one tensor's crossing between two devices costs: the link-cost formula, written once.

The simulator's event loop (`kernel`), the pipelined load of `placer.objectives`
and the load search of `placer.placers.load_search` all charge a crossing with
`transfer_time` (a profiled time, else `link_time`: latency + bytes /
bandwidth), so they cannot disagree on it.

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
