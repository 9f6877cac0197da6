"""`placer serve`: the errors it reports in one line before starting (the server itself: tests/service)."""

from __future__ import annotations

import socket

import pytest


def test_help(cli):
    r = cli("serve", "--help")
    assert r.code == 0 and "--data-dir" in r.out and "PLACER_API_KEYS" in r.out


def test_help_says_another_host_needs_keys_or_insecure(cli):
    out = " ".join(cli("serve", "--help").out.split())
    assert "Without keys it listens on 127.0.0.1, and refuses another interface (--host, PLACER_HOST) unless " \
           "--insecure is given" in out and "PLACER_ADMIN_KEY" in out


def test_another_host_without_keys_is_refused(cli, tmp_path, monkeypatch):
    """Without keys, --host 0.0.0.0 served every route to the network with only a warning (#41)."""
    monkeypatch.delenv("PLACER_API_KEYS", raising=False)
    monkeypatch.delenv("PLACER_INSECURE", raising=False)
    r = cli("serve", "--host", "0.0.0.0", "--data-dir", tmp_path)
    assert r.code == 1 and "refusing to listen on 0.0.0.0 without API keys" in r.err and "--insecure" in r.err
    assert len(r.err.splitlines()) == 1


@pytest.mark.parametrize("how", [["--insecure"], "env"])
def test_insecure_opts_out(cli, tmp_path, monkeypatch, how):
    """--insecure (or PLACER_INSECURE=1) passes the check: here the next one fails, the port being taken."""
    monkeypatch.delenv("PLACER_API_KEYS", raising=False)
    if how == "env":
        monkeypatch.setenv("PLACER_INSECURE", "1")
    with socket.socket() as s:
        s.bind(("0.0.0.0", 0))
        s.listen()
        port = s.getsockname()[1]
        r = cli("serve", "--host", "0.0.0.0", "--port", port, "--data-dir", tmp_path, *(how if how != "env" else []))
    assert r.code == 1 and f"cannot listen on 0.0.0.0:{port}" in r.err


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
