"""Configuration: defaults, a TOML file, HPCGRADE_* variables, and clear refusals."""
import os

import pytest

from server import create_app
from server.config import ConfigError, load_config


@pytest.fixture(autouse=True)
def no_settings_in_environment(monkeypatch):
    """Other tests' fixtures put HPCGRADE_* variables in this process; these tests set their own."""
    for name in [name for name in os.environ if name.startswith("HPCGRADE_")]:
        monkeypatch.delenv(name)


def test_file_then_environment_then_overrides(tmp_path, monkeypatch):
    path = tmp_path / "hpcgrade.toml"
    path.write_text('secret_key = "from-file"\nmax_upload_kb = 10\n'
                    'broker_transport_options = { max_retries = 1 }\n')
    monkeypatch.setenv("HPCGRADE_CONFIG", str(path))
    monkeypatch.setenv("HPCGRADE_MAX_UPLOAD_KB", "20")
    config = load_config({"SUBMISSIONS_PER_WINDOW": 3})
    assert config["SECRET_KEY"] == "from-file" and config["MAX_UPLOAD_KB"] == 20
    assert config["SUBMISSIONS_PER_WINDOW"] == 3
    assert config["BROKER_TRANSPORT_OPTIONS"] == {"max_retries": 1}


@pytest.mark.parametrize("overrides, message", [
    ({"EXECUTOR": "cloud"}, "EXECUTOR must be one of local, not 'cloud'"),
    ({"MAX_UPLOAD_KB": "lots"}, "MAX_UPLOAD_KB must be a whole number"),
    ({"GRADING_LEASE_SECONDS": 0}, "GRADING_LEASE_SECONDS must be positive"),
    ({"DATABSE_URL": "x"}, "unknown settings: DATABSE_URL"),
])
def test_wrong_values_are_named(overrides, message):
    with pytest.raises(ConfigError, match=message):
        load_config(overrides)


def test_a_broken_file_and_a_missing_secret_are_refused(tmp_path, monkeypatch):
    with pytest.raises(ConfigError, match="SECRET_KEY"):
        create_app({})
    path = tmp_path / "broken.toml"
    path.write_text("secret_key = \n")
    monkeypatch.setenv("HPCGRADE_CONFIG", str(path))
    with pytest.raises(ConfigError, match="broken.toml"):
        load_config()
