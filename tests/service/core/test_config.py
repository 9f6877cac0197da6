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
