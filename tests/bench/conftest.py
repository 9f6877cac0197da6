"""Fixtures of the bench scripts' tests."""

import json

import pytest


@pytest.fixture
def one_graph_corpus(tmp_path):
    """A corpus folder in tmp_path whose manifest lists one validation graph, ``v`` (no graph file: a test
    stubs the script's ``load_graph``)."""
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "manifest.json").write_text(json.dumps(
        {"graphs": [{"name": "v", "path": "v.json.gz", "split": "validation", "family": "f"}]}))
    return corpus
