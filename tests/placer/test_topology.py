"""Topology clusters: the spec, its errors, the route rule, and the machines built from it."""

import json
from pathlib import Path

import jsonschema
import numpy as np
import pytest

from placer import machines, presets
from placer.cluster import Cluster, Link
from placer.errors import ClusterError
from placer.topology import pairs_per_direction, route_facts
from tests.placer.helpers import GB, devices, host_with_switch

SCHEMA = json.loads((Path(__file__).parents[2] / "placer" / "schemas" / "cluster.schema.json").read_text())
DEV = {"peak_flops": 1e13, "memory_bandwidth": 9e11, "memory_bytes": 1.6e10}

SPEC = {
    "name": "box",
    "devices": [{"name": n, "kind": k, **DEV}
                for n, k in (("cpu", "cpu"), ("g0", "gpu"), ("g1", "gpu"), ("g2", "gpu"))],
    "topology": {
        "switches": [{"name": "sock", "kind": "cpu-socket"}, {"name": "sw", "kind": "pcie-switch"}],
        "links": [
            {"between": ["cpu", "sock"], "bandwidth": 1e11, "latency": 0.0, "kind": "ddr-memory"},
            {"between": ["sw", "sock"], "bandwidth": 1e10, "latency": 1e-6, "kind": "pcie uplink"},
            {"between": ["g0", "sw"], "bandwidth": 1e10, "latency": 2e-6},
            {"between": ["g1", "sw"], "bandwidth": 1e10, "latency": 2e-6},
            {"between": ["g2", "sock"], "bandwidth": 2e10, "latency": 3e-6},
            {"between": ["g0", "g1"], "bandwidth": 5e10, "latency": 1e-6, "kind": "nvlink"},
        ],
    },
}


def cluster(spec=SPEC) -> Cluster:
    return Cluster.from_dict(json.loads(json.dumps(spec)))


class TestSpec:
    def test_round_trip(self):
        c = cluster()
        assert c.topology is not None and not c.links and c.default_link is None
        again = Cluster.from_dict(c.to_dict())
        assert again.to_dict() == c.to_dict()
        assert "links" not in c.to_dict() and c.to_dict()["topology"]["links"][5]["kind"] == "nvlink"

    def test_validates_against_the_schema(self):
        jsonschema.validate(SPEC, SCHEMA)
        for c in presets.all_presets():
            jsonschema.validate(c.to_dict(), SCHEMA)

    def test_schema_refuses_topology_beside_flat_links(self):
        spec = dict(SPEC, default_link={"bandwidth": 1e9})
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(spec, SCHEMA)

    def test_fingerprint_sees_the_topology(self):
        spec = json.loads(json.dumps(SPEC))
        spec["topology"]["links"][1]["bandwidth"] = 2e10
        assert cluster().fingerprint != cluster(spec).fingerprint

    def test_topology_and_flat_links_exclude_each_other(self):
        c = cluster()
        with pytest.raises(ClusterError, match="either a 'topology' or flat 'links'"):
            Cluster("both", c.devices, default_link=Link(1e9, 0.0), topology=c.topology)

    def test_flat_routes_are_one_direction_per_pair(self):
        r = presets.get("2gpu-flat").routes()
        assert r.offset.tolist() == [0, 0, 1, 2, 3, 3, 4, 5, 6, 6]
        assert r.resource.tolist() == [1, 2, 3, 5, 6, 7]
        assert r.bandwidth[1] == 12e9 and r.latency[5] == 10e-6

    def test_flat_spec_unchanged(self):
        """A flat cluster's spec and fingerprint carry no topology (saved runs keep matching it)."""
        c = presets.get("4gpu-flat")
        assert c.topology is None and "topology" not in c.to_dict()


class TestRoutes:
    def test_fewest_hops(self):
        c = cluster()
        assert c.compiled.paths[("g0", "cpu")] == ("g0", "sw", "sock", "cpu")
        assert c.compiled.paths[("g0", "g1")] == ("g0", "g1")  # the direct NVLink, one hop
        assert c.compiled.paths[("g0", "g2")] == ("g0", "sw", "sock", "g2")

    def test_never_through_a_device(self):
        """g2 -> g1 could go g2 - sock - sw - g0 - g1? No: g0 is a device; sock - sw - g1 it is."""
        assert cluster().compiled.paths[("g2", "g1")] == ("g2", "sock", "sw", "g1")

    def test_route_as_one_link(self):
        """An idle route: bottleneck bandwidth, summed latency."""
        c = cluster()
        link = c.link("g0", "cpu")
        assert link.bandwidth == 1e10 and link.latency == pytest.approx(3e-6)
        bw, lat = c.link_matrices()
        assert bw[1, 2] == 5e10 and lat[3, 1] == pytest.approx(6e-6) and bw[0, 0] == np.inf and lat[0, 0] == 0

    def test_widest_among_the_shortest(self):
        spec = json.loads(json.dumps(SPEC))
        topo = spec["topology"]
        topo["switches"].append({"name": "alt", "kind": "pcie-switch"})
        topo["links"] += [{"between": ["g2", "alt"], "bandwidth": 2e10}, {"between": ["alt", "sw"], "bandwidth": 3e10}]
        # g2 -> g0: g2 - sock - sw - g0 (bottleneck 1e10) and g2 - alt - sw - g0 (also 1e10 at g0's port): tie on
        # hops and width; latency: sock path 3 + 1 + 2 us, alt path 0 + 0 + 2 us -> alt
        assert cluster(spec).compiled.paths[("g2", "g0")] == ("g2", "alt", "sw", "g0")

    def test_lexicographic_last(self):
        spec = json.loads(json.dumps(SPEC))
        topo = spec["topology"]
        topo["switches"].append({"name": "a-twin", "kind": "pcie-switch"})
        topo["links"] += [{"between": ["a-twin", "sock"], "bandwidth": 1e10, "latency": 1e-6},
                          {"between": ["a-twin", "g1"], "bandwidth": 1e10, "latency": 2e-6}]
        assert cluster(spec).compiled.paths[("cpu", "g1")] == ("cpu", "sock", "a-twin", "g1")

    def test_explicit_route_wins(self):
        spec = json.loads(json.dumps(SPEC))
        spec["topology"]["routes"] = [{"from": "g0", "to": "g1", "via": ["sw"]}]
        c = cluster(spec)
        assert c.compiled.paths[("g0", "g1")] == ("g0", "sw", "g1")
        assert c.compiled.paths[("g1", "g0")] == ("g1", "g0")  # the other direction still by the rule
        assert Cluster.from_dict(c.to_dict()).compiled.paths == c.compiled.paths

    def test_routes_as_arrays(self):
        c = cluster()
        r = c.routes()
        D = len(c)
        g0, cpu = c.index["g0"], c.index["cpu"]
        dirs = r.resource[r.offset[g0 * D + cpu]:r.offset[g0 * D + cpu + 1]]
        assert len(dirs) == 3 and r.bandwidth[dirs].min() == 1e10
        back = r.resource[r.offset[cpu * D + g0]:r.offset[cpu * D + g0 + 1]]
        assert sorted(d // 2 for d in back) == sorted(d // 2 for d in dirs)  # same links,
        assert not set(back) & set(dirs)  # other directions


def _edit(change):
    spec = json.loads(json.dumps(SPEC))
    change(spec)
    return spec


@pytest.mark.parametrize("change, message", [
    (lambda s: s["topology"]["links"].append({"between": ["g0", "nowhere"], "bandwidth": 1}),
     r"topology link #6 \('g0' - 'nowhere'\): unknown node 'nowhere'"),
    (lambda s: s["topology"]["links"][2].update(bandwidth=-5),
     r"link #2 \('g0' - 'sw'\): 'bandwidth' must be positive"),
    (lambda s: s["topology"]["links"][2].update(latency=-1), r"'latency' must be non-negative"),
    (lambda s: s["topology"]["links"][2].update(bandwidth=True), r"'bandwidth' must be a finite number"),
    (lambda s: s["topology"]["links"].append({"between": ["sw", "g1"], "bandwidth": 1}),
     r"'sw' and 'g1' are already joined by topology link #3"),
    (lambda s: s["topology"]["links"].append({"between": ["sw", "sw"], "bandwidth": 1}), "joins 'sw' to itself"),
    (lambda s: s["topology"]["links"].append({"between": ["sw"], "bandwidth": 1}), "two node names"),
    (lambda s: s["topology"]["switches"].append({"name": "g1"}), "switch 'g1' has the name of a device"),
    (lambda s: s["topology"]["switches"].append({"name": "sw"}), "duplicate switch name 'sw'"),
    (lambda s: s["topology"]["switches"].append({"name": "lonely"}), "switch 'lonely' has no link"),
    (lambda s: s["devices"].append({"name": "g3", "kind": "gpu", **DEV}), "device 'g3' has no link"),
    (lambda s: s["topology"].update(links=[l for l in s["topology"]["links"] if "g2" not in l["between"]]
                                    + [{"between": ["g2", "g1"], "bandwidth": 1}]),
     "device 'cpu' cannot reach device 'g2'"),
    (lambda s: s["topology"].update(routes=[{"from": "g0", "to": "g2", "via": ["sw", "x"]}]), "unknown node 'x'"),
    (lambda s: s["topology"].update(routes=[{"from": "g2", "to": "g1", "via": ["sock", "sw", "g0"]}]),
     "passes through device 'g0'"),
    (lambda s: s["topology"].update(routes=[{"from": "g0", "to": "g2", "via": ["sw"]}]),
     "no link between 'sw' and 'g2'"),
    (lambda s: s["topology"].update(routes=[{"from": "g0", "to": "zz", "via": []}]), "'zz' is not a device"),
    (lambda s: s["topology"].update(routes=[{"from": "g0", "to": "g1", "via": []}] * 2), "given twice"),
    (lambda s: s.update(default_link={"bandwidth": 1e9}), "either a 'topology' or flat 'links'"),
    (lambda s: s["topology"].update(wires=[]), "unknown field.*'wires'"),
    (lambda s: s["topology"]["links"][0].update(bandwith=1e9), r"'bandwith' \(did you mean 'bandwidth'\?\)"),
    (lambda s: s["topology"]["switches"][0].update(knd="nic"), r"switch .*unknown field\(s\) 'knd'"),
    (lambda s: s["topology"].update(links=[]), "'links' must be a non-empty list"),
])
def test_errors_name_the_bad_element(change, message):
    with pytest.raises(ClusterError, match=message):
        Cluster.from_dict(_edit(change))



class TestMachines:
    @pytest.mark.parametrize("name, gpus", [("dgx-a100", 8), ("dgx-h100", 8), ("dgx-h200", 8), ("2x-dgx-a100", 16)])
    def test_presets_have_sources(self, name, gpus):
        c = presets.get(name)
        assert [d.kind for d in c.devices].count("gpu") == gpus
        assert c.topology is not None and len(c.meta["sources"]) >= 5
        assert name in presets.names()

    def test_dgx_a100_shape(self):
        c = presets.get("dgx-a100")
        paths = c.compiled.paths
        assert paths[("/device:GPU:0", "/device:GPU:7")] == ("/device:GPU:0", "nvswitch", "/device:GPU:7")
        assert paths[("/device:GPU:1", "/device:CPU:0")] == (
            "/device:GPU:1", "pcie-switch0", "socket0", "/device:CPU:0")
        assert paths[("/device:GPU:6", "/device:CPU:0")][2] == "socket1"  # GPUs 4-7 hang off socket 1
        bw, _ = c.link_matrices()
        assert bw[1, 2] == machines.A100_NVLINK3 and bw[0, 1] == machines.A100_PCIE4

    def test_dgx_h200_is_dgx_h100_with_h200_memory(self):
        """Same topology, host and compute rates; only the GPUs' memory size and bandwidth differ."""
        h100, h200 = presets.get("dgx-h100").to_dict(), presets.get("dgx-h200").to_dict()
        assert h200["topology"] == h100["topology"]
        changed = {"memory_bytes", "memory_bandwidth"}
        for a, b in zip(h100["devices"], h200["devices"], strict=True):
            if a["kind"] != "gpu":
                assert a == b
                continue
            assert {k: v for k, v in a.items() if k not in changed} == {k: v for k, v in b.items() if k not in changed}
            assert (b["memory_bandwidth"], b["memory_bytes"]) == (4.8e12, 138 * 2**30)
            assert b["memory_bandwidth"] > a["memory_bandwidth"] and b["memory_bytes"] > a["memory_bytes"]
        assert h200["devices"][1]["matrix_flops"] == machines.H100_TF32 and h200["devices"][1]["peak_flops"] == 67e12
        assert "H200" in h200["meta"]["description"] and "H200" in h200["meta"]["sources"][0]

    def test_two_dgx_a100_sends_through_the_gpus_own_nic(self):
        c = presets.get("2x-dgx-a100")
        a, b = "/job:worker/replica:0/task:0/device:GPU:3", "/job:worker/replica:0/task:1/device:GPU:5"
        assert c.compiled.paths[(a, b)] == (a, "node0/pcie-switch1", "node0/nic3", "ib-switch", "node1/nic5",
                                            "node1/pcie-switch2", b)
        assert c.link(a, b).bandwidth == machines.HDR_IB

    @pytest.mark.parametrize("build, n, name", [
        (machines.v100_pcie_server, 2, "2gpu"), (machines.v100_pcie_server, 4, "4gpu"),
        (machines.v100_pcie_server, 8, "8gpu"), (machines.dgx1, 4, "4gpu-nvlink"), (machines.dgx1, 8, "8gpu-nvlink")])
    def test_v100_presets_are_topologies_with_the_flat_presets_devices(self, build, n, name):
        """The same GPUs and rates; the -flat presets keep the plain roofline they had (5 us per op, 15 GiB)."""
        topo, flat = presets.get(name), presets.get(f"{name}-flat")
        assert topo.name == name and topo.topology is not None and flat.topology is None
        assert [d.to_dict() for d in topo.devices] == [d.to_dict() for d in build(n).devices]
        rates = [(d.name, d.kind, d.peak_flops, d.memory_bandwidth) for d in topo.devices]
        assert rates == [(d.name, d.kind, d.peak_flops, d.memory_bandwidth) for d in flat.devices]
        old = machines.V100_SXM2_ROOFLINE if "nvlink" in name else machines.V100_PCIE_ROOFLINE
        assert all(d.to_dict() == {"name": d.name, **old} for d in flat.devices if d.kind == "gpu")
        assert all(d.fusion and d.dispatch > 0 for d in topo.devices if d.kind == "gpu")

    def test_dgx1_nvlink_pairs(self):
        c = machines.dgx1(8)
        assert all(sum(k for p, k in machines.DGX1_NVLINKS.items() if g in p) == 6 for g in range(8))
        assert c.link("/device:GPU:0", "/device:GPU:3").bandwidth == 2 * machines.NVLINK2  # NV2
        assert c.compiled.paths[("/device:GPU:0", "/device:GPU:5")] == (
            "/device:GPU:0", "pcie-switch0", "socket0", "socket1", "pcie-switch2", "/device:GPU:5")


def _brute_force_route(c: Cluster, src: str, dst: str) -> tuple[str, ...]:
    """The rule stated plainly: list every fewest-hop route (through switches only) and take the smallest key."""
    comp, devices = c.compiled, set(c.device_names)
    paths, stack = [], [(src,)]
    while stack:
        path = stack.pop()
        if path[-1] == dst:
            paths.append(path)
            continue
        if len(path) > 1 and path[-1] in devices:
            continue
        stack += [path + (v,) for v in comp.adj[path[-1]] if v not in path]
    fewest = min(len(p) for p in paths)

    def key(p):
        dirs = [comp.adj[a][b] for a, b in zip(p, p[1:])]
        lat = 0.0
        for r in dirs:
            lat += comp.latency[r]
        return -min(comp.bandwidth[r] for r in dirs), lat, p
    return min((p for p in paths if len(p) == fewest), key=key)


@pytest.mark.parametrize("seed", range(30))
def test_rule_matches_listing_every_route(seed):
    """Random small topologies: the layered computation picks what listing every route picks."""
    rng = np.random.default_rng(seed)
    n_dev, n_sw = int(rng.integers(2, 5)), int(rng.integers(1, 5))
    names = [f"d{i}" for i in range(n_dev)] + [f"s{i}" for i in range(n_sw)]
    links = {}
    for i in range(n_dev):  # each device to a switch, the switches in a chain, then random extra links
        links[frozenset((f"d{i}", f"s{rng.integers(n_sw)}"))] = None
    for i in range(1, n_sw):
        links[frozenset((f"s{i - 1}", f"s{i}"))] = None
    for _ in range(int(rng.integers(0, 6))):
        a, b = rng.choice(names, size=2, replace=False)
        links[frozenset((str(a), str(b)))] = None
    spec = {"name": "r", "devices": [{"name": f"d{i}", "kind": "gpu", **DEV} for i in range(n_dev)],
            "topology": {"switches": [{"name": f"s{i}"} for i in range(n_sw)],
                         "links": [{"between": sorted(p), "bandwidth": float(rng.choice([1.0, 2.0, 4.0])),
                                    "latency": float(rng.choice([0.0, 1.0, 2.0]))} for p in links]}}
    c = Cluster.from_dict(spec)
    for a in c.device_names:
        for b in c.device_names:
            if a != b:
                assert c.compiled.paths[(a, b)] == _brute_force_route(c, a, b)


def test_route_facts_describe_hops_and_sharing():
    """g0 -> host: 3 hops at 1 GB/s; its busiest direction, switch 0's uplink, carries 4 pairs' routes
    (g0 and g1, each to the host and to g2)."""
    c = host_with_switch()
    facts = route_facts(c.routes(), len(c))
    cpu, g0, g1 = (c.index[n] for n in ("cpu", "g0", "g1"))
    assert facts.hops[g0, cpu] == 3 and facts.hops[g0, g1] == 2 and facts.hops[g0, g0] == 0
    assert facts.bandwidth[g0, cpu] == GB and facts.latency[g0, cpu] == 0.0
    assert facts.sharers[g0, cpu] == 4
    assert pairs_per_direction(c.routes())[c.compiled.adj["sw0"]["sock"]] == 4


def test_route_facts_on_the_flat_model_share_nothing():
    flat = Cluster("flat", devices("a", "b", "c"), default_link=Link(GB, 1e-5))
    facts = route_facts(flat.routes(), 3)
    assert facts.hops.tolist() == [[0, 1, 1], [1, 0, 1], [1, 1, 0]]
    assert facts.sharers.tolist() == [[0, 1, 1], [1, 0, 1], [1, 1, 0]]
