"""Op times by class, dispatch, fusion and held memory (`placer.cost_model`), hand-computed."""

import numpy as np
import pytest

from placer.cluster import Cluster, Device, Link
from placer.cost_model import (ALIAS, ELEMENTWISE, MATRIX, OTHER, fused_into_consumer, op_class, op_time_matrix,
                               resident_bytes, roofline_time)
from placer.graph import Op, OpGraph
from placer.simulator import Simulator

PLAIN = dict(kind="gpu", peak_flops=1e12, memory_bandwidth=1e11, memory_bytes=1e12, op_overhead=5e-6)
CLASSES = dict(PLAIN, op_overhead=1e-6, matrix_flops=8e12, matrix_efficiency=0.5, memory_efficiency=0.5,
               dispatch=4e-6)


def one(**dev) -> Cluster:
    return Cluster("one", [Device("/device:GPU:0", **dev)])


def chain(*types: str, out: float = 1e8, flops: float = 1e9) -> OpGraph:
    """o0 -> o1 -> ... with the given op types, each writing `out` bytes and doing `flops`."""
    return OpGraph("chain", [Op(f"o{i}", t, [f"o{i - 1}"] if i else [], output_bytes=out, flops=flops)
                             for i, t in enumerate(types)])


class TestClasses:
    def test_op_types_fall_into_their_class(self):
        assert [op_class(t) for t in ("Conv2DBackpropFilter", "Mul", "Reshape", "Mean")] == [
            MATRIX, ELEMENTWISE, ALIAS, OTHER]

    def test_a_device_without_the_new_fields_is_the_plain_roofline(self):
        """max(flops / peak, bytes / bandwidth) + op_overhead, whatever the op's class."""
        g = chain("MatMul", "Mul", "Reshape", out=1e8, flops=1e9)
        t = op_time_matrix(g, one(**PLAIN))[:, 0]
        # o0 writes 1e8 (0.001 s) and does 1e9 FLOPs (0.001 s); the others read 1e8 and write 1e8: 0.002 s
        np.testing.assert_allclose(t, [1e-3 + 5e-6, 2e-3 + 5e-6, 2e-3 + 5e-6], rtol=1e-15)

    def test_matrix_ops_run_at_the_matrix_rate_the_rest_at_peak(self):
        g = chain("MatMul", "Sigmoid", out=1.0, flops=1e10)
        t = op_time_matrix(g, one(**CLASSES))[:, 0]
        # MatMul: 1e10 / (8e12 * 0.5) = 2.5 ms; Sigmoid: 1e10 / 1e12 = 10 ms; each + 1 us gap
        np.testing.assert_allclose(t, [2.5e-3 + 1e-6, 1e-2 + 1e-6])

    def test_memory_bound_ops_run_at_the_achieved_bandwidth(self):
        t = op_time_matrix(chain("Mean", out=1e8, flops=0.0), one(**CLASSES))[0, 0]
        assert t == pytest.approx(1e8 / (1e11 * 0.5) + 1e-6)

    def test_dispatch_is_the_floor_of_a_tiny_op_and_hidden_under_a_long_one(self):
        t = op_time_matrix(chain("Add", "MatMul", out=4.0, flops=1.0), one(**CLASSES))[:, 0]
        assert t[0] == 4e-6  # kernel ~0 + 1 us gap < 4 us dispatch
        big = op_time_matrix(chain("MatMul", out=4.0, flops=4e10), one(**CLASSES))[0, 0]
        assert big == pytest.approx(4e10 / 4e12 + 1e-6)

    def test_roofline_time_is_the_matrix_formula_for_one_op(self):
        dev = Device("g", **CLASSES)
        assert roofline_time(1e10, 0.0, dev, matrix=True) == pytest.approx(2.5e-3 + 1e-6)
        assert roofline_time(0.0, 0.0, dev) == 4e-6

    def test_an_ops_own_cost_still_wins(self):
        g = OpGraph("g", [Op("a", "MatMul", flops=1e12, cost={"GPU": 0.5})])
        assert op_time_matrix(g, one(**CLASSES))[0, 0] == 0.5


class TestFusion:
    def test_single_consumer_elementwise_pairs_fuse(self):
        """Conv -> Mul -> Relu -> Conv: Mul runs inside Relu; Relu feeds a Conv, so it writes its output."""
        g = chain("Conv2D", "Mul", "Relu", "Conv2D")
        assert fused_into_consumer(g).tolist() == [False, True, False, False]

    def test_an_output_read_twice_is_not_fused(self):
        g = OpGraph("g", [Op("a", "Mul", output_bytes=1.0), Op("b", "Relu", ["a"]), Op("c", "Relu", ["a"])])
        assert not fused_into_consumer(g).any()

    def test_the_tensor_between_fused_ops_is_neither_written_nor_read(self):
        """Mul reads the Conv's output, writes nothing and launches nothing; Relu only writes its output."""
        g = chain("Conv2D", "Mul", "Relu", "Conv2D", out=1e8, flops=0.0)
        bw = 1e11 * 0.5
        fused = op_time_matrix(g, one(**dict(CLASSES, fusion=True)))[:, 0]
        assert fused[1] == pytest.approx(1e8 / bw) and fused[2] == pytest.approx(1e8 / bw + 1e-6)
        plain = op_time_matrix(g, one(**CLASSES))[:, 0]
        assert plain[1] == plain[2] == pytest.approx(2e8 / bw + 1e-6)

    def test_relabelling_ops_move_no_bytes_under_fusion(self):
        g = chain("Conv2D", "Reshape", out=1e8, flops=0.0)
        assert op_time_matrix(g, one(**dict(CLASSES, fusion=True)))[1, 0] == 4e-6

    def test_fused_and_relabelled_outputs_hold_no_memory(self):
        g = chain("Conv2D", "Mul", "Relu", "Reshape", "Conv2D", out=1e8)
        held = resident_bytes(g, Cluster("two", [Device("a", **dict(CLASSES, fusion=True)), Device("b", **PLAIN)],
                                         default_link=Link(1e9, 0.0)))
        assert held[:, 0].tolist() == [1e8, 0.0, 1e8, 0.0, 1e8]
        assert held[:, 1].tolist() == [1e8] * 5

    def test_peak_memory_leaves_out_fused_tensors(self):
        """Conv -> Mul -> Relu -> Conv on one fusing device: at most two 1e8-byte tensors live at once."""
        g = chain("Conv2D", "Mul", "Relu", "Conv2D", out=1e8)
        plain = Simulator(g, one(**CLASSES)).run(np.zeros(4, dtype=np.int64)).peak_memory[0]
        fused = Simulator(g, one(**dict(CLASSES, fusion=True))).run(np.zeros(4, dtype=np.int64)).peak_memory[0]
        assert (plain, fused) == (2e8, 2e8)  # a chain holds two tensors either way...
        g2 = OpGraph("fan", [Op("x", "Conv2D", output_bytes=1e8), Op("m", "Mul", ["x"], output_bytes=1e8),
                             Op("r", "Relu", ["m"], output_bytes=1e8), Op("y", "AddV2", ["x", "r"], output_bytes=1e8)])
        held = [Simulator(g2, one(**dict(CLASSES, fusion=f))).run(np.zeros(4, dtype=np.int64)).peak_memory[0]
                for f in (False, True)]
        assert held == [3e8, 2e8]  # ...but x stays alive across m -> r, and m's copy is never made


class TestDispatch:
    def test_a_chain_of_tiny_ops_gains_nothing_from_being_split(self):
        """Dispatch-bound ops on GPUs of one host: alternating the chain over two GPUs is never faster."""
        devices = [Device(f"/device:GPU:{i}", **CLASSES) for i in range(2)]
        cluster = Cluster("host", devices, default_link=Link(12e9, 10e-6))
        g = chain(*["AddV2"] * 200, out=4.0, flops=1.0)
        sim = Simulator(g, cluster)
        one_gpu = sim.run(np.zeros(200, dtype=np.int64)).step_time
        assert one_gpu == pytest.approx(200 * 4e-6)
        for split in (np.arange(200) % 2, (np.arange(200) >= 100).astype(np.int64)):
            assert sim.run(split).step_time >= one_gpu
