"""This machine as a cluster: its CPU as TensorFlow's logical CPU devices, or its host CPU and GPUs.

- No GPU: N logical CPU devices (default: the cores this process may use), as
  ``placer measure --devices N`` makes them, of kind ``"cpu-local"`` (so op
  costs ``placer profile`` writes apply to them), each an equal share of the
  memory, sharing one thread pool (``shared_threads=1``, as the ``local``
  preset, whose fidelity figures say why). The link between two is the
  ``local`` preset's until ``placer calibrate`` measures it.
- GPUs (``nvidia-smi`` lists them): the host CPU as ``/device:CPU:0`` (kind
  ``"cpu-local"``, all its cores) and each GPU as ``/device:GPU:i`` (kind
  ``"gpu-local"``), joined by the topology ``nvidia-smi topo -m`` describes
  (`placer.measure.nvtopo`). A GPU's peak FP32 FLOP/s and memory bandwidth
  come from its datasheet (`GPU_DATASHEETS`); its memory from ``nvidia-smi``,
  less 1 GiB for the CUDA context.

The CPU's rates are measured, not looked up: the best FP32 matrix product
and the best streaming multiply TensorFlow runs on one thread
(`measure_cpu_rates`, about a second). They are what TensorFlow reaches,
which is what a roofline of this CPU needs.
"""

from __future__ import annotations

import os
import subprocess
import time
from typing import Any, Callable

from placer.cluster import Cluster, Device
from placer.errors import ClusterError
from placer.measure.nvtopo import HostRates, parse_topo_matrix, pcie_bandwidth, topology_from_matrix
from placer.presets import MAX_LOCAL_DEVICES

CPU_KIND = "cpu-local"
GPU_KIND = "gpu-local"
GIB = 2**30
CUDA_CONTEXT_BYTES = 1 * GIB
CPU_OP_OVERHEAD = 1e-6
GPU_OP_OVERHEAD = 5e-6
NVIDIA_SMI_TIMEOUT = 30

GPU_DATASHEETS: list[tuple[str, float, float]] = [
    # (name contains, FP32 FLOP/s, memory bytes/s), first match wins; NVIDIA datasheets
    ("H200", 67e12, 4.8e12),
    ("H100 PCIe", 51e12, 2.0e12),
    ("H100 NVL", 60e12, 3.9e12),
    ("H100", 67e12, 3.35e12),
    ("A100-SXM4-40GB", 19.5e12, 1.555e12),
    ("A100-PCIE-40GB", 19.5e12, 1.555e12),
    ("A100 80GB PCIe", 19.5e12, 1.935e12),
    ("A100", 19.5e12, 2.039e12),
    ("L40S", 91.6e12, 864e9),
    ("L4", 30.3e12, 300e9),
    ("A10", 31.2e12, 600e9),
    ("V100-PCIE", 14e12, 900e9),
    ("V100", 15.7e12, 900e9),
    ("T4", 8.1e12, 320e9),
]

Runner = Callable[[list[str]], "str | None"]


def run_nvidia_smi(args: list[str]) -> str | None:
    """``nvidia-smi ARGS``'s output, or None where there is no nvidia-smi (or it fails)."""
    try:
        r = subprocess.run(["nvidia-smi", *args], capture_output=True, text=True, timeout=NVIDIA_SMI_TIMEOUT)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return r.stdout if r.returncode == 0 else None


def gpu_inventory(run: Runner = run_nvidia_smi) -> list[dict[str, Any]]:
    """Each GPU ``nvidia-smi`` lists: index, name, memory bytes, PCIe generation and width (max)."""
    out = run(["--query-gpu=index,name,memory.total,pcie.link.gen.max,pcie.link.width.max",
               "--format=csv,noheader,nounits"])
    gpus = []
    for line in (out or "").splitlines():
        cells = [c.strip() for c in line.split(",")]
        if len(cells) != 5 or not cells[0].isdigit():
            continue
        number = lambda s: int(s) if s.isdigit() else None  # "[N/A]" where unknown
        gpus.append({"index": int(cells[0]), "name": cells[1], "memory_bytes": (number(cells[2]) or 0) * 2**20,
                     "pcie_generation": number(cells[3]), "pcie_width": number(cells[4])})
    return gpus


def gpu_rates(name: str) -> tuple[float, float]:
    """``(FP32 FLOP/s, memory bytes/s)`` of a GPU from its datasheet.

    Raises
    ------
    ClusterError
        If the GPU is not in `GPU_DATASHEETS`.
    """
    for key, flops, bandwidth in GPU_DATASHEETS:
        if key.lower() in name.lower():
            return flops, bandwidth
    raise ClusterError(f"GPU {name!r} is not among the GPUs whose datasheet placer knows "
                       f"({', '.join(k for k, _, _ in GPU_DATASHEETS)}): write its peak_flops and "
                       "memory_bandwidth into the cluster file by hand")


def measure_cpu_rates(repeats: int = 12) -> dict[str, float]:
    """One thread's best FP32 FLOP/s (512 x 512 matrix product) and bytes/s (x * 2 over 32 MiB) in TensorFlow."""
    import numpy as np
    import tensorflow as tf

    from placer.measure.runner import session_config

    n, words = 512, 8 << 20
    graph = tf.Graph()
    with graph.as_default(), tf.device("/device:CPU:0"):
        a = tf.Variable(np.random.default_rng(0).random((n, n), dtype=np.float32))
        x = tf.Variable(np.ones(words, dtype=np.float32))
        product = tf.reduce_sum(tf.linalg.matmul(a, a))
        stream = tf.group(x * 2.0)  # the product runs, read and written once, and is dropped
        init = tf.compat.v1.global_variables_initializer()
    with tf.compat.v1.Session(graph=graph, config=session_config(1, 1)) as s:
        s.run(init)

        def best(fetch) -> float:
            s.run(fetch)
            times = []
            for _ in range(repeats):
                t0 = time.perf_counter()
                s.run(fetch)
                times.append(time.perf_counter() - t0)
            return min(times)

        return {"peak_flops": 2 * n**3 / best(product), "memory_bandwidth": 2 * 4 * words / best(stream)}


def tensorflow_devices() -> list[str]:
    """TensorFlow's physical devices here (``/physical_device:CPU:0`` ...)."""
    import tensorflow as tf

    return [d.name for d in tf.config.list_physical_devices()]


def memory_bytes() -> float:
    """This machine's physical memory."""
    return float(os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))


def usable_cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def detect_cluster(name: str = "mine", cpus: int | None = None, *, run: Runner = run_nvidia_smi,
                   cpu_rates: dict[str, float] | None = None) -> Cluster:
    """This machine as a cluster (see the module docstring).

    Parameters
    ----------
    name : the cluster's name.
    cpus : logical CPU devices on a machine without GPUs (default: the usable cores).
    run : runs ``nvidia-smi`` (tests give canned output).
    cpu_rates : the CPU's one-thread ``peak_flops`` and ``memory_bandwidth`` (default: `measure_cpu_rates`).

    Raises
    ------
    ClusterError
        If `cpus` is not a positive number, or a GPU's datasheet is unknown.
    """
    from placer import presets

    if cpus is not None and (isinstance(cpus, bool) or not isinstance(cpus, int)
                             or not 1 <= cpus <= MAX_LOCAL_DEVICES):
        raise ClusterError(f"the number of logical CPU devices must be 1 to {MAX_LOCAL_DEVICES}, got {cpus!r}")
    rates = cpu_rates or measure_cpu_rates()
    cores = usable_cores()
    gpus = gpu_inventory(run)
    meta: dict[str, Any] = {"description": "", "detected": {"cores": cores, "memory_bytes": memory_bytes(),
                                                            "cpu_rates_one_thread": rates,
                                                            "gpus": gpus}}
    if cpu_rates is None:  # TensorFlow is loaded already: what it sees (a CPU-only build lists no GPU)
        meta["detected"]["tensorflow_devices"] = tensorflow_devices()
    if not gpus:
        n = cpus or cores
        devices = [Device(f"/device:CPU:{i}", CPU_KIND, rates["peak_flops"], rates["memory_bandwidth"],
                          memory_bytes() / n, CPU_OP_OVERHEAD) for i in range(n)]
        meta["description"] = (f"this machine's CPU ({cores} cores) as {n} logical TensorFlow CPU devices sharing "
                               "one thread pool; rates measured on one thread; link: the local preset's until "
                               "placer calibrate measures it")
        return Cluster(name, devices, default_link=presets.LOCAL_COPY, meta=meta,
                       shared_threads=presets.LOCAL_THREADS)
    host = Device("/device:CPU:0", CPU_KIND, rates["peak_flops"] * cores, rates["memory_bandwidth"] * cores,
                  memory_bytes(), CPU_OP_OVERHEAD)
    devices = [host]
    pcie = {}
    for g in gpus:
        flops, bandwidth = gpu_rates(g["name"])
        devices.append(Device(f"/device:GPU:{g['index']}", GPU_KIND, flops, bandwidth,
                              max(g["memory_bytes"] - CUDA_CONTEXT_BYTES, 0) or GIB, GPU_OP_OVERHEAD))
        pcie[g["index"]] = pcie_bandwidth(g["pcie_generation"], g["pcie_width"])
    text = run(["topo", "-m"])
    if text is None:
        raise ClusterError("nvidia-smi lists GPUs but `nvidia-smi topo -m` failed, so their interconnect is "
                           "unknown")
    meta["detected"]["nvidia_smi_topo"] = text
    topology = topology_from_matrix(parse_topo_matrix(text), host.name, HostRates(host.memory_bandwidth), pcie)
    meta["description"] = (f"this machine: host CPU ({cores} cores, rates measured) and "
                           f"{len(gpus)} x {gpus[0]['name']} (datasheet rates), topology from nvidia-smi topo -m "
                           "with nominal link rates until placer calibrate measures them")
    return Cluster(name, devices, topology=topology, meta=meta)
