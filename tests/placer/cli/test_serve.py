"""`placer serve`: the errors it reports in one line before starting (the server itself: tests/service)."""

from __future__ import annotations

import socket


def test_help(cli):
    r = cli("serve", "--help")
    assert r.code == 0 and "--data-dir" in r.out and "PLACER_API_KEYS" in r.out


def test_help_says_another_host_is_served_with_a_warning(cli):
    """Without keys, loopback is the default, not a limit: --host 0.0.0.0 listens there (Docker's CMD) and warns."""
    out = " ".join(cli("serve", "--help").out.split())
    assert "127.0.0.1 only" not in out
    assert "Without PLACER_API_KEYS it listens on 127.0.0.1 unless --host or PLACER_HOST names another interface" in out


def test_port_in_use(cli, tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        r = cli("serve", "--port", port, "--data-dir", tmp_path)
    assert r.code == 1 and f"cannot listen on 127.0.0.1:{port}" in r.err and len(r.err.splitlines()) == 1


def test_data_dir_is_a_file(cli, tmp_path):
    f = tmp_path / "file"
    f.write_text("")
    r = cli("serve", "--data-dir", f)
    assert r.code == 1 and "data dir" in r.err and "is a file, not a folder" in r.err and len(r.err.splitlines()) == 1


def test_bad_port(cli, tmp_path):
    r = cli("serve", "--port", "70000", "--data-dir", tmp_path)
    assert r.code == 1 and "port" in r.err


def test_unknown_database(cli, tmp_path, monkeypatch):
    monkeypatch.setenv("PLACER_DATABASE_URL", "postgresql://db/placer")
    r = cli("serve", "--data-dir", tmp_path)
    assert r.code == 1 and "postgresql" in r.err and len(r.err.splitlines()) == 1


def test_bad_workers(cli, tmp_path):
    r = cli("serve", "--workers", "0", "--data-dir", tmp_path)
    assert r.code == 1 and "--workers" in r.err
