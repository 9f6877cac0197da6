"""Run the CLI in-process and capture what a user would see; the graph files the commands read."""

import json
from dataclasses import dataclass

import pytest

from placer.cli.main import main
from placer.graph import Op, OpGraph
from placer.graph_io import save_graph
from placer.synthetic import layered_graph


@dataclass
class Run:
    code: int
    out: str
    err: str


@pytest.fixture
def cli(capsys):
    """`cli("simulate", "g.json", ...)` -> Run(code, out, err)."""

    def run(*argv: str) -> Run:
        try:
            code = main([str(a) for a in argv])
        except SystemExit as e:  # argparse usage errors and --help
            code = e.code if isinstance(e.code, int) else 1
        captured = capsys.readouterr()
        return Run(code, captured.out, captured.err)

    return run


@pytest.fixture
def fork_files(tmp_path):
    """tmp_path holding g.json, a fork (s -> x, y -> j), and p.json placing y on GPU:1, the rest on GPU:0.

    Each output is 12 MB, so on preset 2gpu both crossings cost 1.01 ms and the step takes 8.02 ms.
    """
    g = OpGraph("fork", [
        Op("s", "T", cost={"gpu": 1e-3}, output_bytes=12e6),
        Op("x", "T", ["s"], cost={"gpu": 4e-3}, output_bytes=12e6),
        Op("y", "T", ["s"], cost={"gpu": 4e-3}, output_bytes=12e6),
        Op("j", "T", ["x", "y"], cost={"gpu": 1e-3}),
    ])
    save_graph(g, tmp_path / "g.json")
    placement = {"devices": {"s": "/device:GPU:0", "x": "/device:GPU:0", "y": "/device:GPU:1", "j": "/device:GPU:0"}}
    (tmp_path / "p.json").write_text(json.dumps(placement))
    return tmp_path


@pytest.fixture
def layered_graph_file(tmp_path):
    """`layered_graph_file(n, seed=0, name="g.json.gz")` writes `layered_graph(n, seed=seed)` to tmp_path/name."""

    def write(n: int, seed: int = 0, name: str = "g.json.gz"):
        path = tmp_path / name
        save_graph(layered_graph(n, seed=seed), path)
        return path

    return write


@pytest.fixture
def tiny_step():
    """`tiny_step(folder)` -> (graph file, GraphDef file) of a 4 -> Dense(3) training step, batch 2."""

    def make(folder):
        import keras

        from placer.importers import keras_step
        from placer.importers.keras_models import from_tf_function

        keras.utils.set_random_seed(0)
        inp = keras.Input((4,))
        model = keras.Model(inp, keras.layers.Dense(3)(inp), name="tiny")
        step = keras_step(model, 2)
        graph = from_tf_function(step.concrete_function(), step.signature, "tiny",
                                 variable_paths=step.variable_paths, meta=step.meta)
        (folder / "tiny.pb").write_bytes(step.graph_def().SerializeToString())
        save_graph(graph, folder / "tiny.json")
        return folder / "tiny.json", folder / "tiny.pb"

    return make
