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


def test_a_graph_without_origin_is_refused_before_tensorflow_loads():
    """No GraphDef to run: say so at once, without the seconds TensorFlow takes to import."""
    import subprocess
    import sys

    code = ("import sys; from placer.measure.source import NoTensorFlowOrigin, graphdef_of; "
            "from placer.synthetic import layered_graph\n"
            "try:\n    graphdef_of(layered_graph(3, seed=0))\nexcept NoTensorFlowOrigin:\n"
            "    print('tensorflow' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_a_gzipped_graphdef_file_is_read(tmp_path):
    """``model.pbtxt.gz`` is read as the plain file is (measure and export take what import takes)."""
    import gzip

    from placer.measure.source import read_graphdef

    text = b'node { name: "x" op: "Placeholder" attr { key: "dtype" value { type: DT_FLOAT } } }\n'
    (tmp_path / "m.pbtxt.gz").write_bytes(gzip.compress(text))
    assert [n.name for n in read_graphdef(tmp_path / "m.pbtxt.gz").node] == ["x"]
