"""Run a placed TensorFlow graph for real and time its steps.

The GraphDef is imported into a fresh `tf.Graph` with every ``NodeDef.device``
set from the placement, and run in a TF1 `Session` whose config gives
TensorFlow N logical CPU devices (``device_count={"CPU": N}``; GPUs appear by
themselves where there are any). What a `tf.function` captured is rebuilt:

- each resource placeholder standing for a variable becomes a new resource
  variable of its shape and dtype on the placeholder's device (``input_map``
  points the graph at its handle). Values: the caller's (``initial_values``,
  e.g. a live Keras model's), else seeded random ones: uniform(-0.05, 0.05)
  for float tensors, 0.01 for float scalars (learning rates...), 0 for ints;
- each other placeholder (the batch, the targets) becomes a variable holding
  random data of its shape, read on the placeholder's device, so no feed
  copies enter the step time and grappler cannot fold the inputs away.

Nodes the OpGraph folded (``Const``, ``NoOp``) take the device of their
first consumer, as a constant lives where it is used.

One step runs every sink of the graph (the loss, every variable update), so
every op of the graph executes, as the simulator assumes. Grappler's
rewrites are off by default: fusing, folding or moving ops would run a
graph other than the one that was placed.
"""

from __future__ import annotations

import time
import zlib
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

import numpy as np

from placer.errors import PlacementError, PlacerError
from placer.graph import OpGraph
from placer.importers.graphdef import node_of
from placer.measure.pinning import canonical_device, node_devices
from placer.placement import Placement

_SCOPE = "placer_measure"


@dataclass
class Measurement:
    """Step times of one placed graph.

    Attributes
    ----------
    step_times : seconds of each timed step, in order.
    median : median of `step_times`.
    spread : (p90 - p10) / median: the relative width of the middle 80%.
    devices : TensorFlow devices of the session (canonical names).
    ops_per_device : nodes TF's step stats saw running on each device (one traced step).
    """

    step_times: list[float]
    median: float
    spread: float
    devices: list[str]
    ops_per_device: dict[str, int] = field(default_factory=dict)

    @classmethod
    def of(cls, step_times: list[float], devices: list[str], ops_per_device: dict[str, int]) -> "Measurement":
        ts = np.asarray(step_times, dtype=np.float64)
        med = float(np.median(ts))
        p10, p90 = np.percentile(ts, [10, 90])
        return cls(list(map(float, ts)), med, float((p90 - p10) / med) if med > 0 else 0.0, devices,
                   ops_per_device)

    def to_dict(self) -> dict[str, Any]:
        return {"median": self.median, "spread": self.spread, "min": min(self.step_times),
                "max": max(self.step_times), "runs": len(self.step_times), "step_times": self.step_times,
                "devices": self.devices, "ops_per_device": self.ops_per_device}


def _sinks(graph_def) -> list[str]:
    """Nodes nobody reads (data or control): running them runs the whole graph."""
    used = {node_of(src) for node in graph_def.node for src in node.input}
    return [n.name for n in graph_def.node if n.name not in used]


def _targets(graph: OpGraph, graph_def) -> list[str]:
    """What one measured step runs: every sink of the GraphDef, or, for a graph the importer pruned
    (``meta["fetches"]``), its fetches and the sinks it kept, so the nodes it left out stay out. A fetch
    that is a function call the importer inlined is no node of the inlined GraphDef: the sinks of its body
    and its readers stand for it."""
    sinks = _sinks(graph_def)
    fetches = graph.meta.get("fetches")
    if not fetches:
        return sinks
    names = {n.name for n in graph_def.node}
    fed = {n.name for n in graph_def.node if n.op in ("Placeholder", "PlaceholderV2")}  # run as their stand-ins
    return [n for n in dict.fromkeys([*fetches, *(s for s in sinks if s in graph.index)])
            if n in names and n not in fed]


def _random_value(name: str, shape, dtype, seed: int) -> np.ndarray:
    """Seeded by (seed, name), so the same graph gets the same values in every process."""
    rng = np.random.default_rng([seed, zlib.crc32(name.encode())])
    shape = tuple(int(d) for d in shape)
    if dtype.is_floating:
        if not shape:
            return np.asarray(0.01, dtype=dtype.as_numpy_dtype)
        return rng.uniform(-0.05, 0.05, size=shape).astype(dtype.as_numpy_dtype)
    if dtype.is_bool:
        return np.zeros(shape, dtype=bool)
    return np.zeros(shape, dtype=dtype.as_numpy_dtype)


def _input_value(name: str, shape, dtype, seed: int) -> np.ndarray:
    rng = np.random.default_rng([seed, zlib.crc32(name.encode()), 1])
    shape = tuple(int(d) for d in shape)
    if dtype.is_floating:
        return rng.uniform(0.0, 1.0, size=shape).astype(dtype.as_numpy_dtype)
    if dtype.is_bool:
        return np.zeros(shape, dtype=bool)
    return np.zeros(shape, dtype=dtype.as_numpy_dtype)


def session_config(num_cpus: int, inter_op_threads: int | None = None, optimize: bool = False):
    """The ConfigProto measurements run under: N logical CPUs, single-threaded kernels."""
    import tensorflow as tf

    config = tf.compat.v1.ConfigProto(
        device_count={"CPU": int(num_cpus)},
        intra_op_parallelism_threads=1,
        inter_op_parallelism_threads=int(inter_op_threads or 0),
        allow_soft_placement=False,
    )
    if not optimize:
        config.graph_options.rewrite_options.disable_meta_optimizer = True
        config.graph_options.optimizer_options.opt_level = tf.compat.v1.OptimizerOptions.L0
        config.graph_options.optimizer_options.do_constant_folding = False
        config.graph_options.optimizer_options.do_common_subexpression_elimination = False
        config.graph_options.optimizer_options.do_function_inlining = False
    return config


class PlacedStep:
    """A placed training step, built once and run as often as needed.

    Parameters
    ----------
    graph : the OpGraph (its ops' output shapes size the inputs).
    graph_def : the GraphDef `graph` was imported from.
    placement : a device for every op of `graph`.
    num_cpus : logical CPU devices to give TensorFlow.
    initial_values : ``{resource placeholder: array}`` for variables; others get seeded random values.
    inter_op_threads : TensorFlow's inter-op pool size (0: TF's default, the core count).
    optimize : let grappler rewrite the graph (off: run exactly the placed graph).
    seed : seeds the random values.

    Raises
    ------
    PlacementError
        If the placement does not fit the graph, names a device TensorFlow
        does not have, or TensorFlow refuses it (e.g. a variable split from its ops).
    PlacerError
        If a captured resource is not a variable whose shape is known.
    """

    def __init__(self, graph: OpGraph, graph_def, placement: Placement, num_cpus: int = 2, *,
                 initial_values: Mapping[str, Any] | None = None, inter_op_threads: int | None = None,
                 optimize: bool = False, seed: int = 0):
        import tensorflow as tf
        from tensorflow.core.framework import graph_pb2

        from placer.measure.source import variable_specs

        if isinstance(num_cpus, bool) or not isinstance(num_cpus, int) or num_cpus < 1:
            raise PlacerError(f"the number of CPU devices must be a positive integer, got {num_cpus!r}")
        devices = node_devices(graph, graph_def, placement)
        self.graph = graph
        self.node_device = devices
        self.tf_graph = tf.Graph()
        self.session = tf.compat.v1.Session(graph=self.tf_graph,
                                            config=session_config(num_cpus, inter_op_threads, optimize))
        self.devices = sorted(canonical_device(d.name) for d in self.session.list_devices())
        self._check_devices(devices)

        var_specs = variable_specs(graph, graph_def)
        initial_values = dict(initial_values or {})
        placed = graph_pb2.GraphDef()
        placed.CopyFrom(graph_def)
        input_map = {}
        init_ops = []
        with self.tf_graph.as_default(), tf.name_scope(_SCOPE):
            for node in placed.node:
                node.device = devices[node.name]
                if node.op not in ("Placeholder", "PlaceholderV2"):
                    continue
                dtype = tf.dtypes.as_dtype(node.attr["dtype"].type)
                with tf.device(devices[node.name]):
                    if dtype == tf.resource:
                        if node.name not in var_specs:
                            raise PlacerError(f"captured resource {node.name!r} is not a variable of known shape; "
                                              "it cannot be recreated for a measurement")
                        shape, vdt = var_specs[node.name]
                        vdt = tf.dtypes.as_dtype(vdt)
                        value = initial_values.get(node.name)
                        if value is None:
                            value = _random_value(node.name, shape, vdt, seed)
                        var = tf.Variable(np.asarray(value, dtype=vdt.as_numpy_dtype), dtype=vdt)
                        input_map[f"{node.name}:0"] = var.handle
                    else:
                        shape = self._input_shape(node.name)
                        var = tf.Variable(_input_value(node.name, shape, dtype, seed), dtype=dtype,
                                          trainable=False)
                        input_map[f"{node.name}:0"] = var.read_value()
                    init_ops.append(var.initializer)
        with self.tf_graph.as_default():
            try:
                tf.graph_util.import_graph_def(placed, input_map=input_map, name="")
            except (ValueError, TypeError, KeyError, tf.errors.OpError) as e:
                raise PlacerError(f"TensorFlow cannot import the placed graph: {_first_line(e)}") from None
        self.targets = _targets(graph, graph_def)
        self._run(lambda: self.session.run(init_ops))
        self._step = self._run(lambda: self.session.make_callable(self.targets))

    def _input_shape(self, name: str) -> list[int]:
        if name in self.graph.index and self.graph[name].output_shapes:
            return self.graph[name].output_shapes[0]
        raise PlacerError(f"placeholder {name!r} has no known shape in graph {self.graph.name!r}")

    def _check_devices(self, devices: dict[str, str]) -> None:
        have = set(self.devices)
        for dev in sorted(set(devices.values())):
            if dev not in have:
                raise PlacementError(f"placement uses device {dev}, which TensorFlow does not have here "
                                     f"(devices: {', '.join(self.devices)})")

    def _run(self, fn):
        import tensorflow as tf

        try:
            return fn()
        except tf.errors.OpError as e:
            raise PlacementError(f"TensorFlow refused to run the placed graph: {_first_line(e)}") from None

    def run(self) -> float:
        """Run one step; returns its wall-clock seconds."""
        t0 = time.perf_counter()
        self._run(self._step)
        return time.perf_counter() - t0

    def time(self, warmup: int = 2, runs: int = 10,
             progress: Callable[[str, int, int], None] | None = None) -> list[float]:
        """Seconds of `runs` steps after `warmup` untimed ones.

        `progress(phase, done, total)`, when given, is called after each step
        ("warmup", then "timed"): a big graph's step takes seconds, and a
        command should not sit silent through them.
        """
        report = progress or (lambda phase, done, total: None)
        for i in range(warmup):
            self.run()
            report("warmup", i + 1, warmup)
        times = []
        for i in range(runs):
            times.append(self.run())
            report("timed", i + 1, runs)
        return times

    def trace(self):
        """One step with TF's full trace: its ``RunMetadata`` (step stats per device)."""
        import tensorflow as tf

        options = tf.compat.v1.RunOptions(trace_level=tf.compat.v1.RunOptions.FULL_TRACE)
        metadata = tf.compat.v1.RunMetadata()
        self._run(lambda: self.session.run(self.targets, options=options, run_metadata=metadata))
        return metadata

    def nodes_by_device(self, metadata=None) -> dict[str, set[str]]:
        """Which of the graph's nodes TF's step stats saw running on each device (one traced step)."""
        metadata = metadata or self.trace()
        ran: dict[str, set[str]] = {}
        for dev in metadata.step_stats.dev_stats:
            if "/device:" not in dev.device or "stream" in dev.device.lower():
                continue
            names = ran.setdefault(canonical_device(dev.device), set())
            names.update(n.node_name for n in dev.node_stats if n.node_name in self.node_device)
        return ran

    def ops_per_device(self, metadata=None) -> dict[str, int]:
        """How many of the graph's nodes ran on each device (one traced step)."""
        return {dev: len(names) for dev, names in sorted(self.nodes_by_device(metadata).items())}

    def measure(self, warmup: int = 2, runs: int = 10,
                progress: Callable[[str, int, int], None] | None = None) -> Measurement:
        """Time `runs` steps after `warmup`, and trace one to see where ops ran.

        `progress` is `time`'s, and is called once more, as ``("traced", 1, 1)``,
        after the traced step.
        """
        if warmup < 0 or runs < 1:
            raise PlacerError(f"need warmup >= 0 and runs >= 1, got warmup={warmup}, runs={runs}")
        times = self.time(warmup, runs, progress)
        ops = self.ops_per_device()
        if progress is not None:
            progress("traced", 1, 1)
        return Measurement.of(times, self.devices, ops)

    def close(self) -> None:
        self.session.close()

    def __enter__(self) -> "PlacedStep":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _first_line(e: Exception) -> str:
    text = getattr(e, "message", None) or str(e)
    return text.strip().splitlines()[0] if text.strip() else type(e).__name__


def measure_placement(graph: OpGraph, placement: Placement, num_cpus: int = 2, *, graph_def=None,
                      warmup: int = 2, runs: int = 10, **options: Any) -> Measurement:
    """Run `graph` placed by `placement` for real: median and spread of its step time.

    Parameters
    ----------
    graph : a graph imported from TensorFlow (its GraphDef embedded, or given as `graph_def`).
    placement : a device for every op.
    num_cpus : logical CPU devices TensorFlow makes (GPUs are used where present).
    graph_def : the GraphDef `graph` came from; default the one embedded in its meta.
    warmup, runs : untimed and timed steps.
    **options : passed to `PlacedStep` (``inter_op_threads``, ``optimize``, ``initial_values``, ``seed``).

    Raises
    ------
    NoTensorFlowOrigin
        If the graph has no GraphDef behind it.
    PlacementError
        If the placement does not fit the graph or the devices TensorFlow has.

    Examples
    --------
    >>> m = measure_placement(graph, placement, num_cpus=2, runs=5)  # doctest: +SKIP
    >>> m.median, m.ops_per_device  # doctest: +SKIP
    (0.0021, {'/device:CPU:0': 61, '/device:CPU:1': 58})
    """
    from placer.measure.source import graphdef_of

    if graph_def is None:
        graph_def = graphdef_of(graph)
    with PlacedStep(graph, graph_def, placement, num_cpus, **options) as step:
        return step.measure(warmup, runs)
