"""Named clusters modelled on real hardware, with the sources of their numbers.

`load_cluster` takes a preset name or a cluster JSON file, as every command
and the service do.

- GPUs: NVIDIA Tesla V100 16 GB. PCIe card: 14 TFLOP/s FP32, 900 GB/s HBM2
  (NVIDIA V100 datasheet); SXM2 module: 15.7 TFLOP/s FP32, 900 GB/s.
  16 GiB, of which TensorFlow's allocator can use about 15 GiB after the
  CUDA context; we give the devices 15 GiB.
- Host CPU: two Intel Xeon E5-2698 v4 (20 cores each, 2.2 GHz, AVX2 with two
  FMA units: 32 FP32 FLOP/cycle/core, so 2.8 TFLOP/s; four DDR4-2400 channels
  per socket, 153.6 GB/s), 256 GiB, the host of NVIDIA's DGX-1.
- PCIe 3.0 x16: 15.75 GB/s per direction on paper; `cudaMemcpy` of pinned
  memory reaches about 12 GB/s (CUDA samples' bandwidthTest on such hosts),
  with about 10 us of latency including the copy's launch.
- NVLink 2.0: one link is 25 GB/s per direction. In DGX-1 (V100) each GPU
  has NVLink to the three others of its quad and to one GPU of the other quad
  (the hybrid cube-mesh); other pairs go over PCIe and the CPUs' QPI.
- Per-op overhead: about 5 us of kernel launch and executor dispatch on a GPU,
  2 us on the CPU.
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
- ``dgx-a100``, ``dgx-h100``, ``2x-dgx-a100``: machines with an interconnect
  topology (shared PCIe switches, sockets, NVSwitch, NICs), built in
  `placer.machines`, whose meta lists the source of every number.
"""

from __future__ import annotations

import os
import re

from placer import machines
from placer.cluster import Cluster, Device, Link
from placer.errors import ClusterError
from placer.fileio import read_json_file

GIB = 2**30

V100_PCIE = dict(kind="gpu", peak_flops=14.0e12, memory_bandwidth=900e9, memory_bytes=15 * GIB, op_overhead=5e-6)
V100_SXM2 = dict(kind="gpu", peak_flops=15.7e12, memory_bandwidth=900e9, memory_bytes=15 * GIB, op_overhead=5e-6)
HOST_CPU = dict(kind="cpu", peak_flops=2.8e12, memory_bandwidth=153.6e9, memory_bytes=256 * GIB, op_overhead=2e-6)
PCIE3_X16 = Link(bandwidth=12e9, latency=10e-6)
NVLINK2 = Link(bandwidth=25e9, latency=5e-6)

LOCAL_CORE = dict(kind="cpu-local", peak_flops=147e9, memory_bandwidth=12e9, op_overhead=1e-6)
LOCAL_MEMORY = 24 * GIB
LOCAL_COPY = Link(bandwidth=50e9, latency=3e-6)
LOCAL_THREADS = 1


def _pcie(n_gpus: int) -> Cluster:
    devices = [Device("/device:CPU:0", **HOST_CPU)]
    devices += [Device(f"/device:GPU:{i}", **V100_PCIE) for i in range(n_gpus)]
    return Cluster(
        f"{n_gpus}gpu", devices, default_link=PCIE3_X16,
        meta={"description": f"host CPU + {n_gpus} x NVIDIA V100 PCIe 16 GB over PCIe 3.0 x16",
              "sources": "see placer/presets.py"},
    )


def _nvlink(n_gpus: int) -> Cluster:
    devices = [Device("/device:CPU:0", **HOST_CPU)]
    devices += [Device(f"/device:GPU:{i}", **V100_SXM2) for i in range(n_gpus)]
    links = {}
    for i in range(n_gpus):
        for j in range(i + 1, n_gpus):
            same_quad = i // 4 == j // 4
            if same_quad or j == i + 4:
                links[frozenset((f"/device:GPU:{i}", f"/device:GPU:{j}"))] = NVLINK2
    return Cluster(
        f"{n_gpus}gpu-nvlink", devices, links, default_link=PCIE3_X16,
        meta={"description": f"host CPU + {n_gpus} x NVIDIA V100 SXM2 16 GB, NVLink 2.0 as in DGX-1 "
                             "(hybrid cube-mesh), PCIe 3.0 x16 elsewhere",
              "sources": "see placer/presets.py"},
    )


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
    "2gpu": lambda: _pcie(2),
    "4gpu": lambda: _pcie(4),
    "8gpu": lambda: _pcie(8),
    "4gpu-nvlink": lambda: _nvlink(4),
    "8gpu-nvlink": lambda: _nvlink(8),
    "local": lambda: _local(2),
    "dgx-a100": machines.dgx_a100,
    "dgx-h100": machines.dgx_h100,
    "2x-dgx-a100": machines.two_dgx_a100,
}
_LOCAL_N = re.compile(r"local:([0-9]+)")
"""Matched whole (`re.fullmatch`): ``$`` let ``local:2\\n`` through, and ``\\d`` any script's digits (``local:٣``)."""


def names() -> list[str]:
    """Preset names (``local:N`` stands for any N from 1 to 64)."""
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
        if not 1 <= n <= 64:
            raise ClusterError(f"preset {name!r}: the number of devices must be 1 to 64")
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
