"""Fixtures of the bench scripts' tests."""

import json

import pytest

from placer.graph_io import save_graph
from placer.synthetic import layered_graph


@pytest.fixture
def one_graph_corpus(tmp_path):
    """A corpus folder in tmp_path whose manifest lists one validation graph, ``v`` (no graph file: a test
    stubs the script's ``load_graph``)."""
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "manifest.json").write_text(json.dumps(
        {"graphs": [{"name": "v", "path": "v.json.gz", "split": "validation", "family": "f"}]}))
    return corpus


@pytest.fixture
def small_graph(tmp_path):
    """A 120-op layered graph saved in tmp_path, for the scripts that place a graph file."""
    path = tmp_path / "small.json.gz"
    save_graph(layered_graph(120, seed=3), path)
    return path
