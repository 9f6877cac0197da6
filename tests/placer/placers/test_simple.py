"""`single`, `round_robin` and `metis` on cases whose answer is known."""

from placer import presets
from placer.cluster import Cluster, Device, Link
from placer.graph import Op, OpGraph
from placer.placers import registry
from placer.synthetic import layered_graph


def test_single_picks_the_fastest_device():
    g = layered_graph(40, seed=1)
    p = registry.place("single", g, presets.get("2gpu"))
    assert set(p.devices.values()) == {"/device:GPU:0"}
    assert p.meta["fits"] and not p.oom


def test_single_skips_a_fast_device_that_is_too_small():
    devices = [Device("small_fast", "gpu", 1e13, 1e12, 1e6), Device("big_slow", "cpu", 1e12, 1e11, 1e12)]
    c = Cluster("c", devices, default_link=Link(1e9, 0.0))
    g = OpGraph("g", [Op("a", "X", param_bytes=1e7, cost={"gpu": 1.0, "cpu": 5.0})])
    p = registry.place("single", g, c)
    assert p.devices == {"a": "big_slow"} and not p.oom


def test_round_robin_deals_ops_over_the_gpus_in_topological_order():
    g = OpGraph("chain", [Op(f"o{k}", "X", [f"o{k - 1}"] if k else [], cost={"gpu": 1.0}) for k in range(6)])
    p = registry.place("round_robin", g, presets.get("2gpu"))
    assert [p.devices[f"o{k}"] for k in range(6)] == ["/device:GPU:0", "/device:GPU:1"] * 3


def test_round_robin_without_gpus_uses_every_device():
    g = OpGraph("chain", [Op(f"o{k}", "X", [f"o{k - 1}"] if k else []) for k in range(4)])
    p = registry.place("round_robin", g, presets.get("local:2"))
    assert [p.devices[f"o{k}"] for k in range(4)] == ["/device:CPU:0", "/device:CPU:1"] * 2


def test_metis_on_isolated_ops_balances_them():
    g = OpGraph("bag", [Op(f"o{k}", "X", cost={"gpu": 1.0}) for k in range(8)])
    p = registry.place("metis", g, presets.get("2gpu"))
    values = list(p.devices.values())
    assert values.count("/device:GPU:0") == values.count("/device:GPU:1") == 4


def test_metis_gives_a_faster_gpu_a_larger_share():
    """Balanced means equal time: a GPU three times as fast gets three times the work (METIS's tpwgts)."""
    devices = [Device("fast", "gpu", 3e12, 1e15, 1e12, op_overhead=0.0),
               Device("slow", "gpu", 1e12, 1e15, 1e12, op_overhead=0.0)]
    c = Cluster("c", devices, default_link=Link(1e9, 0.0))
    g = OpGraph("bag", [Op(f"o{k}", "X", flops=1e9) for k in range(12)])
    p = registry.place("metis", g, c)
    values = list(p.devices.values())
    assert (values.count("fast"), values.count("slow")) == (9, 3)


def test_metis_offers_a_device_millions_of_times_slower_almost_nothing():
    """A share of 1e-53 is zero in METIS's float32 and it refuses it; the share is floored instead."""
    devices = [Device("fast", "gpu", 1e13, 1e15, 1e12), Device("crawl", "gpu", 1e-40, 1e15, 1e12)]
    c = Cluster("c", devices, default_link=Link(1e10, 0.0))
    g = OpGraph("bag", [Op(f"o{k}", "X", flops=1e9) for k in range(12)])
    p = registry.place("metis", g, c)
    assert set(p.devices.values()) == {"fast"}


def test_metis_with_more_gpus_than_units_places_every_unit_and_prints_nothing(capfd):
    """METIS cannot make empty parts (it prints its complaint on the C stdout, which would spoil --json)."""
    g = OpGraph("chain", [Op("a", "X", flops=1e9), Op("b", "X", ["a"], flops=1e9), Op("c", "X", ["b"], flops=1e9)])
    p = registry.place("metis", g, presets.get("8gpu"))
    assert len(p.devices) == 3 and not p.oom
    out, _ = capfd.readouterr()
    assert out == ""
