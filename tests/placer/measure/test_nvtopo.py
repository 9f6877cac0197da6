"""Parsing ``nvidia-smi topo -m`` and building a cluster topology from it (no GPU needed).

Samples in data/: ``topo_h200.txt`` is real output of a lent H200 (one GPU, tabs, ANSI underline). The others are written in the same format after outputs posted
publicly: a DGX A100 (GPU pairs PXB to the same NICs on NUMA nodes 3, 1, 7, 5; NVIDIA/nccl#1505),
an 8x H100 HGX (NV18, one NIC per GPU; sgl-project/sglang#13973) and a DGX-1 quad (NV1/NV2 direct
links, the older format without NUMA affinity).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from placer.cluster import Cluster, Device
from placer.errors import ClusterError
from placer.measure.detect import detect_cluster
from placer.measure.nvtopo import NVLINK_PER_LINK, HostRates, parse_topo_matrix, topology_from_matrix

DATA = Path(__file__).parent / "data"
RATES = {"peak_flops": 1e11, "memory_bandwidth": 1e10}


def sample(name: str) -> str:
    return (DATA / f"topo_{name}.txt").read_text()


def cluster_of(name: str, n_gpus: int) -> Cluster:
    topo = topology_from_matrix(parse_topo_matrix(sample(name)), "/device:CPU:0", HostRates(2e11))
    devices = [Device("/device:CPU:0", "cpu", 1e12, 2e11, 1e11)]
    devices += [Device(f"/device:GPU:{i}", "gpu", 1e13, 1e12, 1e10) for i in range(n_gpus)]
    return Cluster(name, devices, topology=topo)


class TestParse:
    def test_dgx_a100(self):
        m = parse_topo_matrix(sample("dgx_a100"))
        assert m.gpus == list(range(8)) and m.nics == [f"NIC{i}" for i in range(8)]
        assert m.nvlinks(0, 7) == 12 and m.relation[("GPU1", "NIC0")] == "PXB"
        assert [m.numa[g] for g in range(8)] == [3, 3, 1, 1, 7, 7, 5, 5]
        assert m.cpu_affinity[0] == "48-63,176-191"

    def test_tabs_and_ansi_underline(self):
        m = parse_topo_matrix(sample("8x_h100"))
        assert m.nvlinks(3, 4) == 18 and m.numa[4] == 1 and m.relation[("NIC2", "GPU2")] == "PIX"

    def test_one_real_h200(self):
        m = parse_topo_matrix(sample("h200"))
        assert m.gpus == [0] and m.nics == [] and m.numa == {0: 0}

    def test_older_format_without_numa(self):
        m = parse_topo_matrix(sample("dgx1_quad"))
        assert m.nics == ["mlx5_0"] and m.nvlinks(0, 3) == 2 and m.numa == {g: None for g in range(4)}

    def test_no_matrix(self):
        with pytest.raises(ClusterError, match="no matrix"):
            parse_topo_matrix("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver")

    def test_short_row(self):
        with pytest.raises(ClusterError, match="row GPU1"):
            parse_topo_matrix("\tGPU0\tGPU1\tCPU Affinity\nGPU0\t X \tNV4\t0-7\nGPU1\tNV4\n")


class TestTopology:
    def test_dgx_a100_is_nvswitch_and_four_pcie_switches(self):
        c = cluster_of("dgx_a100", 8)
        kinds = sorted(s.kind for s in c.topology.switches)
        assert kinds.count("pcie-switch") == 4 and kinds.count("cpu-socket") == 4 and "nvswitch" in kinds
        route = c.compiled.paths[("/device:GPU:0", "/device:GPU:5")]
        assert route == ("/device:GPU:0", "nvswitch", "/device:GPU:5")
        bw, _ = c.link_matrices()
        assert bw[1, 2] == 12 * NVLINK_PER_LINK
        # GPUs 0 and 1 share a PCIe switch: their routes to the host share its uplink
        up0 = c.compiled.paths[("/device:GPU:0", "/device:CPU:0")]
        up1 = c.compiled.paths[("/device:GPU:1", "/device:CPU:0")]
        assert up0[1] == up1[1] and up0[1].startswith("pcie")
        # GPUs 0 and 2 do not
        assert c.compiled.paths[("/device:GPU:2", "/device:CPU:0")][1] != up0[1]

    def test_h100_one_switch_per_gpu_and_two_sockets(self):
        c = cluster_of("8x_h100", 8)
        kinds = [s.kind for s in c.topology.switches]
        assert kinds.count("pcie-switch") == 8 and kinds.count("cpu-socket") == 2 and "nvswitch" in kinds

    def test_dgx1_quad_has_direct_nvlinks(self):
        c = cluster_of("dgx1_quad", 4)
        assert all(s.kind != "nvswitch" for s in c.topology.switches)
        bw, _ = c.link_matrices()
        assert bw[1, 4] == 2 * NVLINK_PER_LINK and bw[1, 2] == NVLINK_PER_LINK  # GPU0-GPU3 NV2, GPU0-GPU1 NV1
        # GPUs 0 and 1 are PIX to one NIC: one PCIe switch; 2 and 3 each their own
        assert sum(s.kind == "pcie-switch" for s in c.topology.switches) == 3

    def test_one_gpu(self):
        c = cluster_of("h200", 1)
        assert c.compiled.paths[("/device:GPU:0", "/device:CPU:0")] == ("/device:GPU:0", "pcie0", "numa0",
                                                                         "/device:CPU:0")


class TestDetect:
    def test_no_gpu_gives_logical_cpus(self):
        c = detect_cluster("box", 3, run=lambda args: None, cpu_rates=RATES)
        assert c.device_names == ["/device:CPU:0", "/device:CPU:1", "/device:CPU:2"]
        assert {d.kind for d in c.devices} == {"cpu-local"} and c.shared_threads == 1
        assert c.devices[0].peak_flops == RATES["peak_flops"]

    def test_gpus_from_nvidia_smi(self):
        def run(args):
            if args[0].startswith("--query-gpu"):
                return "".join(f"{i}, NVIDIA A100-SXM4-80GB, 81920, 4, 16\n" for i in range(8))
            return sample("dgx_a100")

        c = detect_cluster("dgx", run=run, cpu_rates=RATES)
        assert len(c) == 9 and c.devices[1].kind == "gpu-local" and c.devices[1].peak_flops == 19.5e12
        assert c.devices[1].memory_bytes == 79 * 2**30
        assert c.topology is not None and "nvidia_smi_topo" in c.meta["detected"]

    def test_a_lent_h200(self):
        """Both nvidia-smi outputs as a lent H200 machine printed them."""
        run = lambda args: "0, NVIDIA H200, 143771, 5, 16\n" if args[0].startswith("--query") else sample("h200")
        c = detect_cluster(run=run, cpu_rates=RATES)
        assert c.device_names == ["/device:CPU:0", "/device:GPU:0"] and c.devices[1].peak_flops == 67e12
        port = next(l for l in c.topology.links if l.a == "/device:GPU:0")
        assert port.bandwidth == pytest.approx(16 * 3.938e9)  # PCIe Gen5 x16

    def test_unknown_gpu_is_a_clear_error(self):
        run = lambda args: "0, Mystery GPU 9000, 1024, 4, 16\n" if args[0].startswith("--query") else sample("h200")
        with pytest.raises(ClusterError, match="Mystery GPU 9000"):
            detect_cluster(run=run, cpu_rates=RATES)

    def test_bad_cpu_count(self):
        with pytest.raises(ClusterError, match="1 to 64"):
            detect_cluster(cpus=0, run=lambda args: None, cpu_rates=RATES)
