"""Settings: environment parsing and the derived defaults."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from service.core.config import Settings


def test_defaults(monkeypatch):
    """Loopback, ./data, SQLite in the data dir."""
    for var in ("PLACER_HOST", "PLACER_API_KEYS", "PLACER_DATA_DIR", "PLACER_DATABASE_URL"):
        monkeypatch.delenv(var, raising=False)
    s = Settings()
    assert s.host == "127.0.0.1" and s.loopback_only and not s.auth_enabled
    assert str(s.data_dir) == "data" and s.database_url == "sqlite:///data/placer.db"


def test_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("PLACER_API_KEYS", " a, b ,,")
    monkeypatch.setenv("PLACER_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("PLACER_HOST", "0.0.0.0")
    monkeypatch.setenv("PLACER_MAX_OPS", "10")
    monkeypatch.setenv("PLACER_TRAIN_COMMAND", "python -m mytrain")
    s = Settings()
    assert s.api_keys == ["a", "b"] and s.auth_enabled
    assert s.database_url == f"sqlite:///{tmp_path}/placer.db"
    assert not s.loopback_only and s.max_ops == 10 and s.train_command == ["python", "-m", "mytrain"]


@pytest.mark.parametrize("field,value", [("port", 70000), ("max_ops", 0), ("max_upload_bytes", -1)])
def test_bad_values_stop_startup(field, value):
    with pytest.raises(ValidationError):
        Settings(**{field: value})


def test_gzip_inflates_no_further_than_a_plain_body(monkeypatch):
    """By default a gzip upload may inflate to what a plain body may be, no more: parsing JSON takes up to
    ~27 times its size in memory, so 512 MiB inflated from a 0.5 MB body was about 13 GB."""
    for var in ("PLACER_MAX_UPLOAD_BYTES", "PLACER_MAX_INFLATED_BYTES"):
        monkeypatch.delenv(var, raising=False)
    s = Settings()
    assert s.max_inflated_bytes <= s.max_upload_bytes
    assert s.max_ops * 300 <= s.max_inflated_bytes  # still room for max_ops ops of a real graph (~270 bytes each)


@pytest.mark.parametrize("value", ["", " ", " , ,"])
def test_api_keys_set_but_blank_stop_startup(monkeypatch, value):
    """PLACER_API_KEYS set to no key (an unset variable in `docker run -e PLACER_API_KEYS=$KEYS`) stops the
    service: it ran without authentication, on 0.0.0.0 in Docker, with only a warning."""
    monkeypatch.setenv("PLACER_API_KEYS", value)
    with pytest.raises(ValidationError, match="names no key"):
        Settings()


def test_blank_keys_in_a_list_are_dropped():
    """A blank key given in code is dropped: it would match a request with no Authorization header."""
    assert Settings(api_keys=["", " k "]).api_keys == ["k"]
    with pytest.raises(ValidationError, match="names no key"):
        Settings(api_keys=[""])
    assert Settings(api_keys=[]).api_keys == [] and not Settings(api_keys=[]).auth_enabled


def test_admin_key_alone_turns_auth_on():
    from service.core.config import Settings

    assert Settings(admin_key=" adm ").auth_enabled and Settings(admin_key=" adm ").admin_key == "adm"
    assert not Settings().auth_enabled


@pytest.mark.parametrize("host, keys, insecure, refused", [
    ("127.0.0.1", [], False, False), ("localhost", [], False, False), ("0.0.0.0", [], False, True),
    ("0.0.0.0", ["k"], False, False), ("0.0.0.0", [], True, False), ("::", [], False, True),
])
def test_exposure_needs_keys_or_insecure(host, keys, insecure, refused):
    from service.core.config import Settings

    s = Settings(host=host, api_keys=keys, insecure=insecure)
    if refused:
        with pytest.raises(ValueError, match="--insecure"):
            s.check_exposure()
    else:
        s.check_exposure()
