"""Clusters: the JSON spec, its errors, and the presets."""

import json

import pytest

from placer import presets
from placer.cluster import Cluster
from placer.presets import load_cluster
from placer.errors import ClusterError

SPEC = {
    "name": "mine",
    "devices": [
        {"name": "c", "kind": "CPU", "peak_flops": 1e12, "memory_bandwidth": 1e11, "memory_bytes": 1e11},
        {"name": "g0", "kind": "gpu", "peak_flops": 1e13, "memory_bandwidth": 9e11, "memory_bytes": 1.6e10},
        {"name": "g1", "kind": "gpu", "peak_flops": 1e13, "memory_bandwidth": 9e11, "memory_bytes": 1.6e10},
    ],
    "links": [{"between": ["g0", "g1"], "bandwidth": 5e10, "latency": 2e-6}],
    "default_link": {"bandwidth": 1e10, "latency": 1e-5},
}


def test_spec_round_trip():
    c = Cluster.from_dict(SPEC)
    assert c.devices[0].kind == "cpu"
    assert c.link("g1", "g0").bandwidth == 5e10
    assert c.link("c", "g0").latency == 1e-5
    again = Cluster.from_dict(c.to_dict())
    assert again.to_dict() == c.to_dict()


def test_optional_device_fields_round_trip_and_are_left_out_at_their_defaults():
    """A spec without them reads, writes and fingerprints as before; one with them keeps them."""
    plain = Cluster.from_dict(SPEC)
    assert set(plain.to_dict()["devices"][1]) == {"name", "kind", "peak_flops", "memory_bandwidth", "memory_bytes",
                                                  "op_overhead"}
    spec = json.loads(json.dumps(SPEC))
    spec["devices"][1].update(matrix_flops=1.5e14, matrix_efficiency=1.15, memory_efficiency=0.9, dispatch=5e-6,
                              fusion=True)
    c = Cluster.from_dict(spec)
    dev = c.devices[1]
    assert (dev.matrix_rate, dev.memory_efficiency, dev.dispatch, dev.fusion) == (1.5e14 * 1.15, 0.9, 5e-6, True)
    assert Cluster.from_dict(c.to_dict()).devices[1] == dev
    assert c.fingerprint != plain.fingerprint
    assert plain.devices[1].matrix_rate == plain.devices[1].peak_flops


@pytest.mark.parametrize("name", ["4gpu", "dgx-a100", "2x-dgx-a100", "8gpu-flat", "local"])
def test_a_preset_and_the_file_written_of_it_are_the_same_hardware(name):
    """The file reads back as floats where the preset has integers (memory_bytes): a run started on one was
    refused on the other as "another cluster". A fingerprint saved before numbers hashed by value still matches."""
    import hashlib

    preset = presets.get(name)
    again = Cluster.from_dict(json.loads(json.dumps(preset.to_dict())))
    assert again.fingerprint == preset.fingerprint and again.same_hardware(preset.fingerprint)
    spec = {k: v for k, v in preset.to_dict().items() if k not in ("name", "meta")}
    if "links" in spec:
        spec["links"] = sorted(spec["links"], key=lambda l: l["between"])
    before = hashlib.sha256(json.dumps(spec, sort_keys=True, separators=(",", ":")).encode()).hexdigest()[:16]
    assert preset.same_hardware(before) and preset.same_hardware(None)
    faster = Cluster.from_dict({**preset.to_dict(), "devices": [
        {**d, "peak_flops": 2 * d["peak_flops"]} for d in preset.to_dict()["devices"]]})
    assert not faster.same_hardware(preset.fingerprint) and not faster.same_hardware(before)


def test_link_matrices():
    bw, lat = Cluster.from_dict(SPEC).link_matrices()
    assert bw[1, 2] == bw[2, 1] == 5e10 and bw[0, 1] == 1e10 and lat[0, 0] == 0


@pytest.mark.parametrize("change, message", [
    (lambda s: s.update(devices=[]), "'devices' must be a non-empty list"),
    (lambda s: s["devices"][1].update(peak_flops=0), "device 'g0': 'peak_flops' must be positive"),
    (lambda s: s["devices"][1].update(memory_bytes=-1), "device 'g0': 'memory_bytes'"),
    (lambda s: s["devices"][1].update(kind=""), "device 'g0': 'kind'"),
    (lambda s: s["devices"][2].update(name="g0"), "duplicate device name 'g0'"),
    (lambda s: s["links"].append({"between": ["g0", "zz"], "bandwidth": 1}), "unknown device 'zz'"),
    (lambda s: s["links"].append({"between": ["g0", "g0"], "bandwidth": 1}), "to itself"),
    (lambda s: s["links"].append({"between": ["g0"], "bandwidth": 1}), "two device names"),
    (lambda s: s.pop("default_link"), "no link between 'c' and 'g0'"),
    (lambda s: s["default_link"].update(latency=-1), "default_link: 'latency'"),
    (lambda s: s["links"].append({"between": ["g1", "g0"], "bandwidth": 1}),
     r"link #1: devices 'g1' and 'g0' are already joined by link #0"),
    (lambda s: s["default_link"].update(between=["c", "g0"]), "default_link .* takes no 'between'"),
    (lambda s: s["devices"][1].update(memory_efficiency=1.5), "device 'g0': 'memory_efficiency' must be a fraction"),
    (lambda s: s["devices"][1].update(matrix_efficiency=0), "device 'g0': 'matrix_efficiency' must be positive"),
    (lambda s: s["devices"][1].update(matrix_flops="fast"), "device 'g0': 'matrix_flops' must be a finite number"),
    (lambda s: s["devices"][1].update(dispatch=-1e-6), "device 'g0': 'dispatch' must be non-negative"),
    (lambda s: s["devices"][1].update(fusion="yes"), "device 'g0': 'fusion' must be true or false"),
    # a misspelt optional field would silently be its default: another machine
    (lambda s: s["devices"][1].update(matrix_eficiency=0.5),
     r"device 'g0': unknown field\(s\) 'matrix_eficiency' \(did you mean 'matrix_efficiency'\?\)"),
    (lambda s: s.update(shared_thread=True), r"unknown field\(s\) 'shared_thread' \(did you mean 'shared_threads'"),
    (lambda s: s["links"][0].update(latncy=1e-6), r"link #0: unknown field\(s\) 'latncy' \(did you mean 'latency'"),
    (lambda s: s["default_link"].update(colour="red"), r"default_link: unknown field\(s\) 'colour'; it takes"),
])
def test_errors_name_the_problem(change, message):
    spec = json.loads(json.dumps(SPEC))
    change(spec)
    with pytest.raises(ClusterError, match=message):
        Cluster.from_dict(spec)


class TestPresets:
    @pytest.mark.parametrize("name, gpus", [("2gpu", 2), ("4gpu", 4), ("8gpu", 8), ("4gpu-nvlink", 4), ("8gpu-nvlink", 8)])
    def test_gpu_presets(self, name, gpus):
        c = presets.get(name)
        kinds = [d.kind for d in c.devices]
        assert kinds.count("gpu") == gpus and kinds.count("cpu") == 1

    def test_nvlink_is_faster_than_pcie_between_linked_gpus(self):
        c = presets.get("8gpu-nvlink")
        assert c.link("/device:GPU:0", "/device:GPU:1").bandwidth > c.link("/device:GPU:0", "/device:CPU:0").bandwidth
        assert c.link("/device:GPU:0", "/device:GPU:4").bandwidth > c.link("/device:GPU:0", "/device:GPU:5").bandwidth

    def test_local_n(self):
        c = presets.get("local:3")
        assert [d.name for d in c.devices] == ["/device:CPU:0", "/device:CPU:1", "/device:CPU:2"]
        assert len(presets.get("local")) == 2
        assert {d.kind for d in c.devices} == {"cpu-local"}  # profiled costs of this CPU apply only here
        assert c.shared_threads == 1  # logical CPUs share TensorFlow's inter-op pool (measured)

    def test_unknown_preset(self):
        with pytest.raises(ClusterError, match="unknown cluster preset"):
            presets.get("3gpu")
        with pytest.raises(ClusterError, match="1 to 64"):
            presets.get("local:0")

    @pytest.mark.parametrize("name", ["local:\u0663", "local:\u0968", "local:2\n", "local:\uff12"])
    def test_local_n_is_ascii_digits_alone(self, name):
        """Another script's digits or a trailing newline named local:N (as cluster 'local' or 'local:3')."""
        assert not presets.is_preset(name)
        with pytest.raises(ClusterError, match="unknown cluster preset"):
            presets.get(name)


class TestLoad:
    def test_preset_or_file(self, tmp_path):
        assert load_cluster("4gpu").name == "4gpu"
        path = tmp_path / "c.json"
        path.write_text(json.dumps(SPEC))
        assert load_cluster(str(path)).name == "mine"

    def test_neither(self):
        with pytest.raises(ClusterError, match="not a preset .* and no such file"):
            load_cluster("nowhere.json")

    def test_bad_file_names_the_file(self, tmp_path):
        path = tmp_path / "c.json"
        path.write_text(json.dumps({"name": "x", "devices": []}))
        with pytest.raises(ClusterError, match="c.json"):
            load_cluster(str(path))


def test_machines_are_the_devices_of_one_tensorflow_task():
    assert [len(n) for n in presets.get("2x-dgx-a100").nodes()] == [9, 9]
    two = presets.get("2x-dgx-a100")
    assert all("/task:1/" in two.devices[i].name for i in two.nodes()[1])
    for name in ("4gpu", "8gpu-nvlink", "dgx-a100", "2gpu-flat", "local:2"):
        cluster = presets.get(name)
        assert cluster.nodes() == [list(range(len(cluster)))]  # names without a task: one machine


@pytest.mark.parametrize("node", [0, 1])
def test_one_machine_of_two_routes_as_the_one_machine_preset(node):
    """A DGX A100 of `2x-dgx-a100` restricted to itself is `dgx-a100`: the same routes, link for link."""
    import numpy as np

    two = presets.get("2x-dgx-a100")
    machine, one = two.restricted(two.nodes()[node]), presets.get("dgx-a100")
    assert [d.kind for d in machine.devices] == [d.kind for d in one.devices] and len(machine) == 9
    for a, b in zip(machine.link_matrices(), one.link_matrices()):
        np.testing.assert_array_equal(a, b)
    assert not any(s.kind == "ib-switch" for s in machine.topology.switches)  # the network is not on its routes
    ra, rb = machine.routes(), one.routes()
    np.testing.assert_array_equal(np.diff(ra.offset), np.diff(rb.offset))  # as many hops for every pair


def test_a_flat_cluster_restricted_keeps_the_links_among_its_devices():
    cluster = presets.get("4gpu-flat")
    part = cluster.restricted([1, 3])
    assert part.device_names == [cluster.device_names[1], cluster.device_names[3]]
    assert part.link(*part.device_names) == cluster.link(cluster.device_names[1], cluster.device_names[3])
