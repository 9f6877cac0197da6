"""`placer import-keras`: argument errors, one line each, before any model is built."""

import pytest


@pytest.mark.parametrize("argv, message", [
    (["--batch", "0"], "--batch must be a positive integer up to 2147483647, got 0"),
    (["--batch", str(10**11)], f"--batch must be a positive integer up to 2147483647, got {10**11}"),
    (["--batch", "2", "--input-shape", "32,32,0"], "--input-shape '32,32,0': expected H,W,C positive integers"),
    (["--batch", "2", "--input-shape", f"32,{2**31},3"], f"--input-shape '32,{2**31},3': expected H,W,C"),
])
def test_out_of_range_sizes_are_one_line_errors(cli, tmp_path, argv, message):
    """A batch past int32 failed inside TensorFlow (Dropout's mask) as a page-long internal error."""
    r = cli("import-keras", "mobilenet", "-o", tmp_path / "g.json", *argv)
    assert r.code == 1 and r.err.startswith(f"placer import-keras: error: {message}")
    assert r.err.count("\n") == 1 and not (tmp_path / "g.json").exists()
