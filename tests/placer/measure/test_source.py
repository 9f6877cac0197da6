"""Where a graph's TensorFlow original comes from: the embedded GraphDef and the files beside it."""

import base64

import pytest

from placer.errors import ModelImportError
from placer.measure.source import META_KEY, graphdef_of
from placer.synthetic import layered_graph


def test_corrupt_embedded_graphdef_is_one_error():
    """Deflate data zlib rejects (not just a bad header) is reported as corrupt, not as zlib's own error."""
    g = layered_graph(5, seed=0)
    g.meta[META_KEY] = {"encoding": "gzip+base64", "data": base64.b64encode(b"\x1f\x8b\x08 not really gzip").decode()}
    with pytest.raises(ModelImportError, match="embedded GraphDef is corrupt"):
        graphdef_of(g)
