"""Named clusters modelled on real hardware, with the sources of their numbers.

`load_cluster` takes a preset name or a cluster JSON file, as every command
and the service do.

- ``2gpu``, ``4gpu``, ``8gpu`` (V100 PCIe cards two to a PCIe switch on a
  dual-socket host), ``4gpu-nvlink``, ``8gpu-nvlink`` (DGX-1's hybrid
  cube-mesh), ``dgx-a100``, ``dgx-h100``, ``dgx-h200`` (the DGX H100 system
  with H200 GPUs), ``2x-dgx-a100``: machines with an interconnect topology
  (shared PCIe ports and switches, sockets, NVLink, NVSwitch, NICs), built in
  `placer.machines`, whose meta lists the source of every number.
- ``2gpu-flat`` ... ``8gpu-nvlink-flat``: the same devices in the idealised
  flat model (every pair of devices its own full-duplex link: PCIe 3.0 x16,
  or NVLink 2.0 between DGX-1's NVLink pairs), as every V100 preset was
  before topologies; kept to compare against and because step times
  published with them stay reproducible.
- `local`: this machine (2-core Intel Xeon of the Sapphire/Emerald Rapids
  family at 2.3 GHz, AVX-512 with two FMA units: 64 FP32 FLOP/cycle, so
  about 147 GFLOP/s per core; about 12 GB/s of memory bandwidth per core;
  24 GiB) as N logical CPU devices, each one core and an equal share of
  memory, as TensorFlow makes them with ``device_count={"CPU": N}``. Measured
  here (``bench/bench_fidelity.py``, calibration): a tensor crossing between
  two logical CPU devices is handed over in host memory, not copied: about
  3 us per crossing (64 B) and about 8-80 us for 4 MiB, so latency 3 us and
  50 GB/s. Logical CPU devices are no separate hardware: TensorFlow runs them
  all on one inter-op thread pool, and two independent chains of ops split
  over two logical CPUs ran 0.94x as fast as on one (this machine's two cores
  are shared with other work), so the preset's devices share one thread
  (``shared_threads=1``): placement changes only what crossings cost. A
  chain of tiny ops costs about 0.5 us per op: op overhead 1 us. Their kind
  is ``"cpu-local"``, so op costs profiled on this machine
  (`placer.measure.profile`) apply to them and not to another preset's CPU.
"""

from __future__ import annotations

import os
import re

from placer import machines
from placer.cluster import Cluster, Device, Link
from placer.errors import ClusterError
from placer.fileio import read_json_file

GIB = 2**30

LOCAL_CORE = dict(kind="cpu-local", peak_flops=147e9, memory_bandwidth=12e9, op_overhead=1e-6)
LOCAL_MEMORY = 24 * GIB
LOCAL_COPY = Link(bandwidth=50e9, latency=3e-6)
LOCAL_THREADS = 1


def _local(n: int) -> Cluster:
    devices = [
        Device(f"/device:CPU:{i}", memory_bytes=LOCAL_MEMORY / n, **LOCAL_CORE) for i in range(n)
    ]
    return Cluster(
        "local" if n == 2 else f"local:{n}", devices, default_link=LOCAL_COPY,
        meta={"description": f"this machine's CPU as {n} logical TensorFlow CPU devices sharing one thread pool",
              "sources": "see placer/presets.py"},
        shared_threads=LOCAL_THREADS,
    )


_FIXED = {
    "2gpu": lambda: machines.v100_pcie_server(2),
    "4gpu": lambda: machines.v100_pcie_server(4),
    "8gpu": lambda: machines.v100_pcie_server(8),
    "4gpu-nvlink": lambda: machines.dgx1(4),
    "8gpu-nvlink": lambda: machines.dgx1(8),
    "local": lambda: _local(2),
    "dgx-a100": machines.dgx_a100,
    "dgx-h100": machines.dgx_h100,
    "dgx-h200": machines.dgx_h200,
    "2x-dgx-a100": machines.two_dgx_a100,
    "2gpu-flat": lambda: machines.flat_v100(2),
    "4gpu-flat": lambda: machines.flat_v100(4),
    "8gpu-flat": lambda: machines.flat_v100(8),
    "4gpu-nvlink-flat": lambda: machines.flat_v100(4, nvlink=True),
    "8gpu-nvlink-flat": lambda: machines.flat_v100(8, nvlink=True),
}
MAX_LOCAL_DEVICES = 64
"""The most logical CPU devices of a ``local:N`` cluster (and of `placer measure --devices`, `detect-cluster
--cpus`): past a few per core they only slow each other, and TensorFlow makes a thread pool for each."""
_LOCAL_N = re.compile(r"local:([0-9]+)")
"""Matched whole (`re.fullmatch`): ``$`` let ``local:2\\n`` through, and ``\\d`` any script's digits (``local:٣``)."""


def names() -> list[str]:
    """Preset names (``local:N`` stands for any N from 1 to `MAX_LOCAL_DEVICES`)."""
    return list(_FIXED) + ["local:N"]


def is_preset(name: str) -> bool:
    return name in _FIXED or bool(_LOCAL_N.fullmatch(name))


def get(name: str) -> Cluster:
    """The preset cluster called `name`.

    Raises
    ------
    ClusterError
        If no preset has that name.
    """
    if name in _FIXED:
        return _FIXED[name]()
    m = _LOCAL_N.fullmatch(name)
    if m:
        n = int(m.group(1))
        if not 1 <= n <= MAX_LOCAL_DEVICES:
            raise ClusterError(f"preset {name!r}: the number of devices must be 1 to {MAX_LOCAL_DEVICES}")
        return _local(n)
    raise ClusterError(f"unknown cluster preset {name!r}; presets: {', '.join(names())}")


def all_presets() -> list[Cluster]:
    return [f() for f in _FIXED.values()]


def load_cluster(spec: str) -> Cluster:
    """A cluster from a preset name (``2gpu``, ``local:4``...) or a JSON file path.

    Raises
    ------
    ClusterError
        If `spec` is neither a known preset nor a readable cluster file.
    """
    if is_preset(spec):
        return get(spec)
    if os.path.exists(spec):
        try:
            return Cluster.from_dict(read_json_file(spec, "cluster"))
        except ClusterError as e:
            raise ClusterError(f"cluster file {spec!r}: {e}") from None
    raise ClusterError(
        f"unknown cluster {spec!r}: not a preset ({', '.join(names())}) and no such file"
    )
