"""Generic file I/O: errors that name the file, atomic writes (graph files: test_graph_io.py)."""

import errno
import os
import stat
import threading

import pytest

from placer.errors import ModelImportError
from placer.fileio import read_bytes, write_atomic


def test_read_bytes_raises_the_asked_error_class(tmp_path):
    """Importers reuse the reader and get their own error class, with the same messages."""
    with pytest.raises(ModelImportError, match="^model 'x': no such file$"):
        read_bytes(tmp_path / "nope", "model 'x'", ModelImportError)


def test_a_refused_write_names_the_file_and_leaves_no_temporary(tmp_path, monkeypatch):
    """A full disk (or read-only folder) is an OSError about the file asked for; the half-written temporary goes."""
    def refuse(src, dst):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(src))

    monkeypatch.setattr("placer.fileio.os.replace", refuse)
    with pytest.raises(OSError) as info:
        write_atomic(tmp_path / "g.json", b"{}")
    assert info.value.filename == str(tmp_path / "g.json") and info.value.errno == errno.ENOSPC
    assert list(tmp_path.iterdir()) == []


def test_write_atomic_writes_into_a_pipe_and_leaves_it_one(tmp_path):
    """`-o /dev/stdout` or a fifo is written to, not replaced by a regular file through the rename."""
    fifo = tmp_path / "out.fifo"
    os.mkfifo(fifo)
    got = []
    reader = threading.Thread(target=lambda: got.append(open(fifo, "rb").read()), daemon=True)
    reader.start()
    write_atomic(fifo, b"placement")
    reader.join(timeout=10)
    assert got == [b"placement"] and stat.S_ISFIFO(os.stat(fifo).st_mode)
