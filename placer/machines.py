"""Real machines as topology clusters, each number with its source.

Every builder returns a `Cluster` with a `placer.topology.Topology` and a
``meta["sources"]`` list saying where each figure comes from (``placer
clusters NAME`` and ``GET /v1/clusters`` show it). `placer.presets` names
all of them; the V100 machines (`v100_pcie_server`, `dgx1`) are ``2gpu`` ...
``8gpu-nvlink``, and `flat_v100` builds the V100 machines in the idealised
flat model (``2gpu-flat`` ...), devices and links as those presets were
before topologies and op costs by class.

Conventions:

- a link's bandwidth is bytes/s per direction, and where a measurement
  exists it is the measured figure (pinned ``cudaMemcpy``, bandwidthTest,
  p2pBandwidthLatencyTest, nvbandwidth), not the signalling rate;
- latency sits mostly on a device's own port: the measured end-to-end
  latency of a small copy (launch and DMA set-up included) minus the switch
  hops, so that a route's summed latency is the measured figure;
- the host CPU is one TensorFlow device (``/device:CPU:0``) joined to every
  socket by that socket's memory (its DRAM bandwidth), so a GPU reaches host
  memory through its own socket;
- GPU memory: what TensorFlow's allocator gets (V100 16 GB: 14,684 MiB, from
  its log); the 80 GB cards' 78 GiB and the H200's 138 GiB are the card's
  memory as CUDA reports it (79.2 and 139.8 GiB measured on an H100 80GB and
  an H200) less about 1.5 GiB for the CUDA context and TensorFlow's reserve;
- GPU op costs by class with dispatch and fusion (`GPU_COSTS`, matrix rates
  and efficiencies, sources in `GPU_COST_SOURCES`; docs/simulator.md); the
  host CPU keeps the plain roofline with 2 us per op.
"""

from __future__ import annotations

from typing import Any

from placer.cluster import Cluster, Device, Link
from placer.topology import Route, Switch, TopoLink, Topology

GIB = 2**30
GB = 1e9
US = 1e-6

CPU_OP_OVERHEAD = 2e-6

# GPU op costs (placer.cost_model, docs/simulator.md#op-costs); each figure's source in GPU_COST_SOURCES
GPU_LAUNCH_GAP = 1.2e-6  # measured: back-to-back kernels replayed from a CUDA graph, H200
GPU_DISPATCH = 5e-6  # host time to issue one op (TensorFlow executor + cudaLaunchKernel)
GPU_MEMORY_EFFICIENCY = 0.9  # measured: fp32 add 4.28-4.36 of 4.8 TB/s on H200
FP32_MATRIX_EFFICIENCY = 1.3  # FP32 matrix ops (no tensor cores), fitted to the V100 calibration rows
A100_TF32 = 156e12  # dense TF32 tensor cores (datasheet)
A100_TF32_EFFICIENCY = 0.35  # fitted to the calibration table's A100 TF32 row
H100_TF32 = 494.5e12  # dense TF32 tensor cores, H100 SXM5 (datasheet: 989 with sparsity)
H100_TF32_EFFICIENCY = 0.4  # fitted to the calibration table's H200 TF32 rows
GPU_COSTS = dict(op_overhead=GPU_LAUNCH_GAP, dispatch=GPU_DISPATCH, memory_efficiency=GPU_MEMORY_EFFICIENCY,
                 fusion=True)

GPU_COST_SOURCES = [
    "op costs by class (docs/simulator.md#op-costs): launch gap 1.2 us = kernels replayed from a CUDA graph, "
    "2000 tiny ops; eager PyTorch issues one op every 8.4 us, a launch + sync round trip 16.5 us; achieved "
    "memory bandwidth 0.9 = fp32 add of 2^26-2^28 elements at 4.28-4.36 TB/s of 4.8 (measured on a lent H200 "
    "by python -m bench.gpu_facts, bench/results/gpu_facts_h200.json; on a lent H100 80GB HBM3 1.25 us, 7.8 us "
    "and 0.90 = 3.03 of 3.35 TB/s, gpu_facts_h100.json); dispatch 5 us per op on the host "
    "(TensorFlow's executor + cudaLaunchKernel, the per-op figure these presets charged before); XLA-style "
    "fusion of element-wise chains (NVIDIA's published TensorFlow runs use XLA or fused kernels)",
    "matrix ops: TensorFlow (2.4+) runs MatMul and convolutions on TF32 tensor cores on Ampere and Hopper by "
    "default; V100 in FP32. Achieved efficiencies fitted to bench/results/calibration.json "
    "(python -m bench.bench_calibration): FP32 1.3 of peak, fitted to the V100 rows (cuDNN's Winograd 3x3 "
    "convolutions beat the direct-FLOP rate: 88-90 TFLOP/s measured on H200's 67 FP32 peak, while its 1x1 "
    "and 7x7 convolutions reach 17-32; the factor also absorbs part of the element-wise time of the unfused "
    "Keras batch norm), A100 TF32 0.35 of 156, H100 TF32 0.4 of 494.5 (measured on H200: TF32 convolutions "
    "20-243 TFLOP/s, large matmuls 388-408)",
]

# ---------------------------------------------------------------------------------------------- DGX A100
A100_SXM4_80GB = dict(kind="gpu", peak_flops=19.5e12, memory_bandwidth=2039e9, memory_bytes=78 * GIB,
                      matrix_flops=A100_TF32, matrix_efficiency=A100_TF32_EFFICIENCY, **GPU_COSTS)
EPYC_7742_X2 = dict(kind="cpu", peak_flops=2 * 64 * 2.25e9 * 32, memory_bandwidth=2 * 204.8e9,
                    memory_bytes=2048 * GIB, op_overhead=CPU_OP_OVERHEAD)
A100_NVLINK3 = 272 * GB  # measured p2p writes (12 links x 25 GB/s = 300 GB/s nominal per direction)
A100_PCIE4 = 25.13 * GB  # measured host<->device, x16 Gen4
EPYC_XGMI = 4 * 16 * 16e9 * 128 / 130 / 8  # four x16 xGMI-2 links at 16 GT/s, per direction
EPYC_DDR4 = 204.8 * GB  # 8 channels of DDR4-3200 per socket
HDR_IB = 25 * GB  # 200 Gb/s per direction
NVLINK_LATENCY = 1.5 * US  # per hop; two hops GPU -> NVSwitch -> GPU: the measured ~3 us
PCIE_PORT_LATENCY = 9 * US  # a small cudaMemcpy: launch + DMA set-up, on the GPU's port
HOP_LATENCY = 0.5 * US  # a PCIe switch, socket or IB switch hop
IB_LATENCY = 1 * US  # NIC <-> IB switch, each side

DGX_A100_SOURCES = [
    "NVIDIA DGX A100 User Guide and 'NVIDIA DGX A100 System Architecture' (WP-10083-001): 8x A100 SXM4 on 6 "
    "NVSwitches, 2x AMD EPYC 7742, 4 PCIe Gen4 switches each joining 2 GPUs and 2 ConnectX-6 HDR NICs to a socket "
    "(GPUs 0-3 on socket 0, 4-7 on socket 1), 2 TB DDR4 (640 GB model); nvidia-smi topo -m of a DGX A100 shows "
    "GPU pairs (0,1), (2,3)... each PXB to the same two NICs, GPUs 0-3 on NUMA nodes of socket 0 "
    "(github.com/NVIDIA/nccl/issues/1505)",
    "NVIDIA A100 datasheet: 19.5 TFLOP/s FP32, 2,039 GB/s HBM2e (80 GB SXM), NVLink 3 600 GB/s bidirectional "
    "(12 links x 25 GB/s per direction)",
    "NVLink 3 272 GB/s per direction and about 3 us a copy: p2pBandwidthLatencyTest on an 8x A100-SXM4-80GB "
    "node (unidirectional P2P writes 265-276 GB/s, P2P write latency 2.5-3.5 us; GPUs 0-3 on NUMA node 0, 4-7 on "
    "node 1; github.com/LLMServe/DistServe/issues/3)",
    "PCIe 4.0 x16 25.13 GB/s: nvbandwidth host_to_device_memcpy_sm on A100-SXM4 "
    "(github.com/NVIDIA/nvbandwidth/issues/42); the switch uplinks are x16 Gen4 too",
    "AMD EPYC 7742: 64 cores, 2.25 GHz base, 2x256-bit FMA (32 FP32 FLOP/cycle/core): 4.6 TFLOP/s per socket; "
    "8 channels DDR4-3200: 204.8 GB/s per socket; sockets joined by 4 x16 xGMI-2 links at 16 GT/s "
    "(126 GB/s per direction, nominal, not measured)",
    "ConnectX-6 HDR InfiniBand: 200 Gb/s = 25 GB/s per direction (datasheet); about 1 us NIC + switch latency",
    "latency: a small copy over PCIe about 10 us including its launch (as the V100 presets; the same node's "
    "GPU-to-GPU copies through the host took 24 us, two PCIe crossings); approximate",
]


def _gpu_name(node: int | None, i: int, kind: str = "GPU") -> str:
    return f"/device:{kind}:{i}" if node is None else f"/job:worker/replica:0/task:{node}/device:{kind}:{i}"


def _dgx_node(node: int | None, gpu: dict, host: dict, nvlink: float, pcie: float, ddr: float, socket_link: float,
              nic_bw: float, nic_kind: str, pcie_kind: str, nvlink_kind: str, port_latency: float = PCIE_PORT_LATENCY,
              ) -> tuple[list[Device], list[Switch], list[TopoLink]]:
    """One DGX-style node: 8 GPUs on one NVSwitch fabric, 4 PCIe switches of 2 GPUs + 2 NICs, 2 sockets.

    The NVSwitch chips act as one non-blocking switch: each GPU's port to it
    carries all of its NVLinks (a GPU's NVLink bandwidth is its port's).
    """
    p = "" if node is None else f"node{node}/"
    cpu = _gpu_name(node, 0, "CPU")
    devices = [Device(cpu, **host)] + [Device(_gpu_name(node, i), **gpu) for i in range(8)]
    switches = [Switch(f"{p}nvswitch", "nvswitch"), Switch(f"{p}socket0", "cpu-socket"),
                Switch(f"{p}socket1", "cpu-socket")]
    links = [TopoLink(cpu, f"{p}socket{s}", ddr, 0.0, "ddr-memory") for s in (0, 1)]
    links.append(TopoLink(f"{p}socket0", f"{p}socket1", socket_link, HOP_LATENCY, "socket-interconnect"))
    for sw in range(4):
        name = f"{p}pcie-switch{sw}"
        switches.append(Switch(name, "pcie-switch"))
        links.append(TopoLink(name, f"{p}socket{sw // 2}", pcie, HOP_LATENCY, f"{pcie_kind} uplink"))
        for i in (2 * sw, 2 * sw + 1):
            links.append(TopoLink(_gpu_name(node, i), name, pcie, port_latency, pcie_kind))
            switches.append(Switch(f"{p}nic{i}", nic_kind))
            links.append(TopoLink(f"{p}nic{i}", name, pcie, HOP_LATENCY, pcie_kind))
    for i in range(8):
        links.append(TopoLink(_gpu_name(node, i), f"{p}nvswitch", nvlink, NVLINK_LATENCY, nvlink_kind))
    return devices, switches, links


def dgx_a100(name: str = "dgx-a100") -> Cluster:
    """NVIDIA DGX A100: 8 x A100 80 GB SXM4 on NVSwitch, PCIe 4.0 to 2 AMD EPYC 7742 sockets."""
    devices, switches, links = _dgx_node(None, A100_SXM4_80GB, EPYC_7742_X2, A100_NVLINK3, A100_PCIE4, EPYC_DDR4,
                                         EPYC_XGMI, HDR_IB, "nic-cx6-hdr", "pcie4-x16", "nvlink3-x12")
    return Cluster(name, devices, topology=Topology(switches, links), meta=_meta(
        "NVIDIA DGX A100: host CPU (2x AMD EPYC 7742) + 8x A100 80 GB SXM4, NVLink 3 via NVSwitch, PCIe 4.0 "
        "switches pairing GPUs with HDR NICs", DGX_A100_SOURCES))


def two_dgx_a100(name: str = "2x-dgx-a100") -> Cluster:
    """Two DGX A100 whose 8 HDR NICs each meet one InfiniBand switch: 16 GPUs, 2 host CPUs.

    GPU i of a node sends through NIC i, the one beside it on its PCIe switch
    (as NCCL pairs them): explicit routes, since the fewest-hop rule would
    send both GPUs of a switch through its first NIC.
    """
    devices, switches, links = [], [Switch("ib-switch", "ib-switch")], []
    for node in (0, 1):
        d, s, l = _dgx_node(node, A100_SXM4_80GB, EPYC_7742_X2, A100_NVLINK3, A100_PCIE4, EPYC_DDR4, EPYC_XGMI,
                            HDR_IB, "nic-cx6-hdr", "pcie4-x16", "nvlink3-x12")
        devices += d
        switches += s
        links += l
        links += [TopoLink(f"node{node}/nic{i}", "ib-switch", HDR_IB, IB_LATENCY, "ib-hdr") for i in range(8)]
    routes = []
    for a in range(8):
        for b in range(8):
            for na, nb in ((0, 1), (1, 0)):
                routes.append(Route(_gpu_name(na, a), _gpu_name(nb, b),
                                    (f"node{na}/pcie-switch{a // 2}", f"node{na}/nic{a}", "ib-switch",
                                     f"node{nb}/nic{b}", f"node{nb}/pcie-switch{b // 2}")))
    return Cluster(name, devices, topology=Topology(switches, links, routes), meta=_meta(
        "two NVIDIA DGX A100 (16x A100 80 GB) joined by their 8 InfiniBand HDR 200 Gb/s NICs each through one "
        "switch; GPU i sends through NIC i", DGX_A100_SOURCES + [
            "InfiniBand HDR switch (e.g. NVIDIA QM8700): non-blocking, so only NIC ports are shared"]))


# ---------------------------------------------------------------------------------------------- DGX H100
H100_SXM5_80GB = dict(kind="gpu", peak_flops=67e12, memory_bandwidth=3350e9, memory_bytes=78 * GIB,
                      matrix_flops=H100_TF32, matrix_efficiency=H100_TF32_EFFICIENCY, **GPU_COSTS)
H200_SXM_141GB = dict(H100_SXM5_80GB, memory_bandwidth=4800e9, memory_bytes=138 * GIB)
"""The H100 SXM5's compute with HBM3e: 4.8 TB/s and 141 GB (139.8 GiB as CUDA reports it)."""
XEON_8480C_X2 = dict(kind="cpu", peak_flops=2 * 56 * 2.0e9 * 64, memory_bandwidth=2 * 307.2e9,
                     memory_bytes=2048 * GIB, op_overhead=CPU_OP_OVERHEAD)
H100_NVLINK4 = 376 * GB  # measured p2p writes (450 GB/s nominal per direction)
H100_PCIE5 = 54 * GB  # measured pinned cudaMemcpy over PCIe 5.0 x16: 53.7 host->device, 54.6 device->host
H100_PCIE_PORT_LATENCY = 3.6 * US  # measured 4-byte pinned copy 4.0-4.2 us, less the switch uplink's hop
XEON_UPI = 4 * 32 * GB  # four UPI 2.0 links at 16 GT/s, per direction
XEON_DDR5 = 307.2 * GB  # 8 channels DDR5-4800 per socket
NDR_IB = 50 * GB  # ConnectX-7 400 Gb/s per direction

DGX_H100_SOURCES = [
    "NVIDIA DGX H100 User Guide / datasheet: 8x H100 SXM5 80 GB, 4 NVSwitch chips (NVLink 4, 900 GB/s "
    "bidirectional per GPU), 2x Intel Xeon Platinum 8480C, 2 TB DDR5, 8x ConnectX-7 400 Gb/s; GPUs paired with "
    "NICs behind PCIe Gen5 switches, laid out here as in DGX A100 (2 GPUs + 2 NICs per switch, GPUs 0-3 on "
    "socket 0): nvidia-smi topo -m of an 8x H100 node with two 56-core Xeons shows NV18 between all GPUs, "
    "GPUs 0 and 1 PXB to the same NICs and GPUs 0-3 on NUMA node 0 (github.com/deepseek-ai/DeepEP/issues/145)",
    "NVIDIA H100 SXM5 datasheet: 67 TFLOP/s FP32, 3.35 TB/s HBM3",
    "NVLink 4 376 GB/s per direction: p2pBandwidthLatencyTest unidirectional P2P writes on HGX H100 SXM "
    "(371-377 GB/s, github.com/NVIDIA/nccl/issues/1264)",
    "PCIe 5.0 x16 54 GB/s per direction and 4.1 us a small copy: measured on a lent NVIDIA H200 (same PCIe 5.0 "
    "x16 port as the H100 SXM5) by python -m bench.gpu_facts (bench/results/gpu_facts_h200.json; PyTorch 2.11, "
    "CUDA 13): pinned cudaMemcpy of 1 GiB 53.7 GB/s host->device and 54.6 device->host, 4-byte pinned copies "
    "4.0-4.2 us, pageable 5.6-15 GB/s; both directions at once 86 GB/s in total (near full duplex: one link per "
    "direction), two host->device copies at once 53.5 GB/s in total (one port shared). Used rather than the "
    "44 GB/s mean of nvbandwidth's SM-driven copies on an 8x H100 system (host_to_device_memcpy_sm 35.2, "
    "device_to_host_memcpy_sm 52.8 GB/s, github.com/NVIDIA/nvbandwidth/issues/24), because TensorFlow copies "
    "tensors with the copy engines (cudaMemcpyAsync of pinned buffers), which the measurement times, and both "
    "directions agree at 85-87% of the 63 GB/s signalling rate, as PCIe 3.0 and 4.0 copies do (12 of 15.75, "
    "25.1 of 31.5); p2pBandwidthLatencyTest with P2P disabled (through the host) 36-38 GB/s on HGX H100 "
    "(github.com/NVIDIA/nccl/issues/1264) crosses PCIe twice. On a lent H100 80GB HBM3 (the preset's GPU; "
    "bench/results/gpu_facts_h100.json) the same measurement gives 51.4 and 55.1 GB/s and 3.8-4.3 us. Both "
    "GPUs sat directly on their hosts' root ports, not behind a DGX's PCIe switch",
    "Intel Xeon Platinum 8480C: 56 cores, 2.0 GHz base, AVX-512 with 2 FMA units (64 FP32 FLOP/cycle/core): "
    "7.2 TFLOP/s per socket; 8 channels DDR5-4800: 307.2 GB/s per socket; 4 UPI 2.0 links at 16 GT/s "
    "(32 GB/s per direction each, nominal, not measured)",
    "ConnectX-7: 400 Gb/s = 50 GB/s per direction (datasheet)",
    "latency: PCIe port 3.6 us so that a GPU <-> host route sums to the measured 4.1 us; NVLink, socket and NIC "
    "hops as in dgx-a100 (approximate)",
]


DGX_H200_SOURCES = [
    "NVIDIA DGX H200 datasheet: the DGX H100 system (4 NVSwitch chips, NVLink 4, 2x Intel Xeon Platinum 8480C, "
    "2 TB DDR5, 8x ConnectX-7 400 Gb/s) with 8x H200 141 GB (1,128 GB in all); MLPerf Inference v4.1 system "
    "description of NVIDIA's 8x H200 node (mlcommons/inference_results_v4.1, closed/NVIDIA/systems/"
    "H200-SXM-141GBx8_TRT_MaxQ.json): H200-SXM-141GB HBM3e, 18x 4th Gen NVLink 900 GB/s, PCIe Gen5 x16, "
    "2x Xeon Platinum 8480C, 2 TB. Every other figure as in dgx-h100 (below)",
    "NVIDIA H200 datasheet: H200 SXM 141 GB HBM3e at 4.8 TB/s; the H100 SXM5's GH100 compute (67 TFLOP/s FP32, "
    "494.5 dense TF32); CUDA reports 150,109,880,320 bytes (139.8 GiB) on a lent H200 "
    "(bench/results/gpu_facts_h200.json), 138 GiB of which TensorFlow gets",
]


def _dgx_hopper(name: str, gpu: dict, description: str, sources: list[str]) -> Cluster:
    """A DGX H100 system (NVSwitch, NVLink 4, PCIe 5.0, 2 Xeon 8480C sockets, ConnectX-7) with 8 x `gpu`."""
    devices, switches, links = _dgx_node(None, gpu, XEON_8480C_X2, H100_NVLINK4, H100_PCIE5, XEON_DDR5,
                                         XEON_UPI, NDR_IB, "nic-cx7-ndr", "pcie5-x16", "nvlink4-x18",
                                         port_latency=H100_PCIE_PORT_LATENCY)
    return Cluster(name, devices, topology=Topology(switches, links), meta=_meta(description, sources))


def dgx_h100(name: str = "dgx-h100") -> Cluster:
    """NVIDIA DGX H100: 8 x H100 80 GB SXM5 on NVSwitch (NVLink 4), PCIe 5.0 to 2 Intel Xeon 8480C sockets."""
    return _dgx_hopper(name, H100_SXM5_80GB, "NVIDIA DGX H100: host CPU (2x Xeon 8480C) + 8x H100 80 GB SXM5, "
                       "NVLink 4 via NVSwitch, PCIe 5.0", DGX_H100_SOURCES)


def dgx_h200(name: str = "dgx-h200") -> Cluster:
    """NVIDIA DGX H200: the DGX H100 system with 8 x H200 141 GB (HBM3e, 4.8 TB/s), the H100's compute."""
    return _dgx_hopper(name, H200_SXM_141GB, "NVIDIA DGX H200: host CPU (2x Xeon 8480C) + 8x H200 141 GB SXM "
                       "(HBM3e 4.8 TB/s, H100 compute), NVLink 4 via NVSwitch, PCIe 5.0",
                       DGX_H200_SOURCES + DGX_H100_SOURCES)


# ---------------------------------------------------------------------------------------------- V100 machines
V100_MEMORY = 14684 * 2**20  # what TensorFlow's allocator gets on a V100 16 GB (V100_SOURCES)
V100_PCIE_ROOFLINE = dict(kind="gpu", peak_flops=14.0e12, memory_bandwidth=900e9, memory_bytes=15 * GIB,
                          op_overhead=5e-6)
V100_SXM2_ROOFLINE = dict(V100_PCIE_ROOFLINE, peak_flops=15.7e12)
"""The V100s as every preset had them before op costs by class (plain roofline, 5 us per op, 15 GiB):
the ``-flat`` presets keep them, so that step times published with those stay reproducible."""
V100_PCIE = dict(V100_PCIE_ROOFLINE, memory_bytes=V100_MEMORY, matrix_efficiency=FP32_MATRIX_EFFICIENCY,
                 **GPU_COSTS)
V100_SXM2 = dict(V100_PCIE, peak_flops=15.7e12)
E5_2698V4_X2 = dict(kind="cpu", peak_flops=2.8e12, memory_bandwidth=153.6e9, memory_bytes=256 * GIB,
                    op_overhead=CPU_OP_OVERHEAD)
PCIE3 = 12 * GB  # pinned cudaMemcpy over PCIe 3.0 x16
E5_DDR4 = 76.8 * GB  # 4 channels DDR4-2400 per socket
E5_QPI = 2 * 19.2 * GB  # two QPI links at 9.6 GT/s, per direction
NVLINK2 = 25 * GB  # one NVLink 2 link, per direction

V100_SOURCES = [
    "NVIDIA V100 datasheet: PCIe card 14 TFLOP/s FP32, SXM2 15.7 TFLOP/s, 900 GB/s HBM2, 16 GB; TensorFlow's "
    "allocator gets 14,684 MiB of it (TF 2.6 log on a V100-SXM2-16GB: 'Created device ... with 14684 MB memory', "
    "keras-team/keras-io examples/vision/md/swin_transformers.md; TF 1.13 logs show 14,827-14,839 MiB)",
    "host: 2x Intel Xeon E5-2698 v4 (20 cores, 2.2 GHz, AVX2 2 FMA: 1.4 TFLOP/s per socket; 4 channels "
    "DDR4-2400: 76.8 GB/s per socket; 2 QPI links at 9.6 GT/s: 38.4 GB/s per direction), the DGX-1 host",
    "PCIe 3.0 x16: 12 GB/s pinned cudaMemcpy (CUDA samples' bandwidthTest), about 10 us per small copy",
    "NVLink 2: 25 GB/s per link per direction; DGX-1 (V100) hybrid cube-mesh as nvidia-smi topo -m shows it: "
    "within a quad GPU pairs (0,3), (1,2) and across (0,4), (1,5), (2,6)... as in dgx1(); double links (NV2) "
    "carry 50 GB/s",
    "DGX-1: 4 PCIe switches (PLX PEX8747), each with 2 GPUs and an EDR NIC; GPUs 0-3 on socket 0",
]


def _host(devices: list[Device], switches: list[Switch], links: list[TopoLink], ddr: float, qpi: float) -> None:
    devices.append(Device("/device:CPU:0", **E5_2698V4_X2))
    switches += [Switch("socket0", "cpu-socket"), Switch("socket1", "cpu-socket")]
    links += [TopoLink("/device:CPU:0", f"socket{s}", ddr, 0.0, "ddr-memory") for s in (0, 1)]
    links.append(TopoLink("socket0", "socket1", qpi, HOP_LATENCY, "qpi"))


def _pcie_pairs(n_gpus: int, switches: list[Switch], links: list[TopoLink]) -> None:
    """GPUs two to a PCIe 3.0 switch; switches alternate between the sockets' halves (first half on socket 0)."""
    n_sw = max(1, n_gpus // 2)
    for sw in range(n_sw):
        name = f"pcie-switch{sw}"
        switches.append(Switch(name, "pcie-switch"))
        socket = f"socket{sw * 2 // n_sw if n_sw > 1 else 0}"
        links.append(TopoLink(name, socket, PCIE3, HOP_LATENCY, "pcie3-x16 uplink"))
        for i in range(2 * sw, min(2 * sw + 2, n_gpus)):
            links.append(TopoLink(f"/device:GPU:{i}", name, PCIE3, PCIE_PORT_LATENCY, "pcie3-x16"))


def v100_pcie_server(n_gpus: int) -> Cluster:
    """The topology version of ``2gpu`` / ``4gpu`` / ``8gpu``: V100 PCIe cards two to a switch, dual socket."""
    devices: list[Device] = []
    switches: list[Switch] = []
    links: list[TopoLink] = []
    _host(devices, switches, links, E5_DDR4, E5_QPI)
    devices += [Device(f"/device:GPU:{i}", **V100_PCIE) for i in range(n_gpus)]
    _pcie_pairs(n_gpus, switches, links)
    return Cluster(f"{n_gpus}gpu", devices, topology=Topology(switches, links), meta=_meta(
        f"host CPU + {n_gpus} x NVIDIA V100 PCIe 16 GB, two per PCIe 3.0 switch, dual-socket host", V100_SOURCES))


DGX1_NVLINKS = {(0, 1): 1, (0, 2): 1, (0, 3): 2, (0, 4): 2, (1, 2): 2, (1, 3): 1, (1, 5): 2, (2, 3): 2, (2, 6): 1,
                (3, 7): 1, (4, 5): 1, (4, 6): 1, (4, 7): 2, (5, 6): 2, (5, 7): 1, (6, 7): 2}
"""DGX-1 (V100) NVLink pairs and their link counts (NV1 / NV2 of ``nvidia-smi topo -m``); each GPU has 6."""


def dgx1(n_gpus: int) -> Cluster:
    """The topology version of ``4gpu-nvlink`` / ``8gpu-nvlink``: DGX-1 (V100) hybrid cube-mesh.

    GPU pairs without NVLink (and GPU <-> host) go over PCIe and, between the
    halves, the sockets' QPI: the fewest-hop rule never sends a transfer
    through another GPU, as CUDA peer copies do not.
    """
    devices: list[Device] = []
    switches: list[Switch] = []
    links: list[TopoLink] = []
    _host(devices, switches, links, E5_DDR4, E5_QPI)
    devices += [Device(f"/device:GPU:{i}", **V100_SXM2) for i in range(n_gpus)]
    _pcie_pairs(n_gpus, switches, links)
    for (a, b), k in DGX1_NVLINKS.items():
        if b < n_gpus:
            links.append(TopoLink(f"/device:GPU:{a}", f"/device:GPU:{b}", k * NVLINK2, 2 * NVLINK_LATENCY,
                                  f"nvlink2-x{k}"))
    return Cluster(f"{n_gpus}gpu-nvlink", devices, topology=Topology(switches, links), meta=_meta(
        f"host CPU + {n_gpus} x NVIDIA V100 SXM2 16 GB, NVLink 2.0 hybrid cube-mesh as in DGX-1, PCIe 3.0 "
        "switches and QPI elsewhere", V100_SOURCES))


FLAT_PCIE3 = Link(bandwidth=PCIE3, latency=10e-6)  # written as the flat presets had it (10 * US is 1 ulp less)
FLAT_NVLINK2 = Link(bandwidth=NVLINK2, latency=5e-6)


def flat_v100(n_gpus: int, nvlink: bool = False) -> Cluster:
    """``2gpu-flat`` ... ``8gpu-nvlink-flat``: the V100 machines in the idealised flat model.

    Every pair of devices has a full-duplex link of its own: NVLink 2.0 between
    GPUs of one quad and between GPU i and i + 4 when `nvlink` (DGX-1's NVLink
    pairs, each taken as one link), PCIe 3.0 x16 for every other pair. Nothing
    is shared, so these step times are lower than the topology presets' for
    placements that move much data; they are the V100 presets' numbers from
    before topologies and before op costs by class (`V100_PCIE_ROOFLINE`).
    """
    gpu = V100_SXM2_ROOFLINE if nvlink else V100_PCIE_ROOFLINE
    devices = [Device("/device:CPU:0", **E5_2698V4_X2)]
    devices += [Device(f"/device:GPU:{i}", **gpu) for i in range(n_gpus)]
    links = {}
    if nvlink:
        for i in range(n_gpus):
            for j in range(i + 1, n_gpus):
                if i // 4 == j // 4 or j == i + 4:
                    links[frozenset((f"/device:GPU:{i}", f"/device:GPU:{j}"))] = FLAT_NVLINK2
    suffix = "-nvlink-flat" if nvlink else "-flat"
    interconnect = "NVLink 2.0 as in DGX-1, PCIe 3.0 x16 elsewhere" if nvlink else "PCIe 3.0 x16"
    return Cluster(f"{n_gpus}gpu{suffix}", devices, links, default_link=FLAT_PCIE3, meta={
        "description": f"host CPU + {n_gpus} x NVIDIA V100 {'SXM2' if nvlink else 'PCIe'} 16 GB, every pair its own "
                       f"link ({interconnect}): the idealised flat model",
        "sources": list(V100_SOURCES) + [
            "devices as before op costs by class: plain FP32 roofline, 5 us per op, 15 GiB (V100_PCIE_ROOFLINE)"],
        "model": "flat (every pair its own link; docs/clusters.md)"})


def _meta(description: str, sources: list[str]) -> dict[str, Any]:
    return {"description": description, "sources": list(sources) + GPU_COST_SOURCES,
            "model": "topology (docs/topology.md)"}
