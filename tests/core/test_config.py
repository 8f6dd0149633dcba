"""Configuration: defaults, a TOML file, HPCGRADE_* variables, and clear refusals; the reference
in docs/ written from the settings' definitions."""

import dataclasses
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from server.core.config import (
    SLURM_KEYS,
    ConfigError,
    Resources,
    Settings,
    app_settings,
    load_settings,
)
from server.core.course_admin import slurm_with
from server.web.app import create_app
from worker.cli.main import main

REFERENCE = Path(__file__).parents[2] / "docs" / "configuration.md"


@pytest.fixture(autouse=True)
def no_settings_in_environment(monkeypatch):
    """Other tests' fixtures put HPCGRADE_* variables in this process; these tests set their own."""
    for name in [name for name in os.environ if name.startswith("HPCGRADE_")]:
        monkeypatch.delenv(name)


def test_file_then_environment_then_overrides(tmp_path, monkeypatch):
    path = tmp_path / "hpcgrade.toml"
    path.write_text(
        'secret_key = "from-file"\nmax_upload_kb = 10\n'
        "broker_transport_options = { max_retries = 1 }\n"
    )
    monkeypatch.setenv("HPCGRADE_CONFIG", str(path))
    monkeypatch.setenv("HPCGRADE_MAX_UPLOAD_KB", "20")
    config = load_settings({"SUBMISSIONS_PER_WINDOW": 3})
    assert config.secret_key == "from-file" and config.max_upload_kb == 20
    assert config.submissions_per_window == 3
    assert config.broker_transport_options == {"max_retries": 1}


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"EXECUTOR": "cloud"}, "EXECUTOR must be one of local, slurm, not 'cloud'"),
        ({"SLURM_MEMORY": "lots"}, "SLURM_MEMORY must be an amount of memory like 4G"),
        ({"SLURM_TIME": "1h"}, "SLURM_TIME must be a time like 30, 1:30:00"),
        ({"SLURM_GPUS": -1}, "SLURM_GPUS must be at least 0"),
        ({"SLURM_PARTITION": "gpu; rm -rf"}, "SLURM_PARTITION must be a name"),
        ({"SLURM_EXTRA": ["constraint=a100"]}, "is not an sbatch option"),
        ({"SLURM_MODULES": "cuda/12"}, "SLURM_MODULES must be written as JSON"),
        ({"COLLECT_SECONDS": "soon"}, "COLLECT_SECONDS must be a number of seconds"),
        ({"MAX_UPLOAD_KB": "lots"}, "MAX_UPLOAD_KB must be a whole number"),
        ({"GRADING_LEASE_SECONDS": 0}, "GRADING_LEASE_SECONDS must be positive"),
        ({"SPOOL_MIN_FREE_MB": -1}, "SPOOL_MIN_FREE_MB must be at least 0"),
        ({"DATABSE_URL": "x"}, "unknown settings: DATABSE_URL"),
        ({"SESSION_COOKIE_SECURE": "maybe"}, "SESSION_COOKIE_SECURE must be true or false"),
        ({"SESSION_COOKIE_SAMESITE": "None"}, "SESSION_COOKIE_SAMESITE must be one of Lax, Strict"),
        (
            {"LOGIN_LIMITS_PER_ACCOUNT": "5 a minute"},
            "LOGIN_LIMITS_PER_ACCOUNT must be limits like",
        ),
    ],
)
def test_wrong_values_are_named(overrides, message):
    with pytest.raises(ConfigError, match=message):
        load_settings(overrides)


def test_cookie_flags_from_a_file_and_the_environment(tmp_path, monkeypatch):
    path = tmp_path / "hpcgrade.toml"
    path.write_text("session_cookie_secure = false\n")
    monkeypatch.setenv("HPCGRADE_CONFIG", str(path))
    assert load_settings().session_cookie_secure is False
    monkeypatch.setenv("HPCGRADE_SESSION_COOKIE_SECURE", "true")
    assert load_settings().session_cookie_secure is True
    monkeypatch.delenv("HPCGRADE_CONFIG")
    monkeypatch.delenv("HPCGRADE_SESSION_COOKIE_SECURE")
    assert load_settings().session_cookie_secure is True  # on unless turned off


def test_a_broken_file_and_a_missing_secret_are_refused(tmp_path, monkeypatch):
    with pytest.raises(ConfigError, match="SECRET_KEY"):
        create_app({})
    path = tmp_path / "broken.toml"
    path.write_text("secret_key = \n")
    monkeypatch.setenv("HPCGRADE_CONFIG", str(path))
    with pytest.raises(ConfigError, match="broken.toml"):
        load_settings()


def test_a_slurm_table_and_json_lists(tmp_path, monkeypatch):
    from server.core.config import Resources

    path = tmp_path / "hpcgrade.toml"
    path.write_text(
        'executor = "slurm"\n[slurm]\npartition = "gpu"\ngpus = 2\nmemory = "8G"\n'
        'time = "1:30:00"\nextra = ["--constraint=a100"]\n'
    )
    monkeypatch.setenv("HPCGRADE_CONFIG", str(path))
    monkeypatch.setenv("HPCGRADE_SLURM_MODULES", '["cuda/12.4", "python/3.11"]')
    config = load_settings()
    assert config.executor == "slurm" and config.slurm_modules == ("cuda/12.4", "python/3.11")
    assert config.slurm_resources == Resources(
        partition="gpu", gpus=2, memory=8192, time=90, extra=("--constraint=a100",)
    )


def test_an_unknown_key_in_the_slurm_table_is_named(tmp_path, monkeypatch):
    path = tmp_path / "hpcgrade.toml"
    path.write_text("[slurm]\ngpu = 1\n")
    monkeypatch.setenv("HPCGRADE_CONFIG", str(path))
    with pytest.raises(ConfigError, match="unknown settings: SLURM_GPU"):
        load_settings()


def test_the_deploy_example_is_a_valid_configuration(monkeypatch):
    from pathlib import Path

    monkeypatch.setenv(
        "HPCGRADE_CONFIG", str(Path(__file__).parents[2] / "deploy" / "hpcgrade.toml")
    )
    config = load_settings()
    assert config.executor == "slurm" and config.slurm_time == 30
    assert config.slurm_memory == 8192 and config.slurm_batch_size == 20


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"SET_PASSWORD_LINK_DAYS": 0}, "SET_PASSWORD_LINK_DAYS must be positive"),
        ({"PUBLIC_URL": "grader.uni.es"}, "PUBLIC_URL must be an http\\(s\\) address"),
        ({"PUBLIC_URL": "https://grader.uni.es/?x=1"}, "PUBLIC_URL must be an http\\(s\\) address"),
        ({"MAIL_SERVER": "smtp.uni.es"}, "MAIL_SERVER is set: set MAIL_FROM too"),
        ({"MAIL_SERVER": "smtp.uni.es", "MAIL_FROM": "nobody"}, "MAIL_FROM must be a mail address"),
        ({"MAIL_PORT": "smtp"}, "MAIL_PORT must be a whole number"),
        ({"MAIL_STARTTLS": "sometimes"}, "MAIL_STARTTLS must be true or false"),
    ],
)
def test_wrong_link_and_mail_settings_are_named(overrides, message):
    with pytest.raises(ConfigError, match=message):
        load_settings(overrides)


def test_link_and_mail_settings(monkeypatch):
    config = load_settings()
    assert config.set_password_link_days == 14 and config.public_url is None
    assert config.mail_server is None  # no mail unless set up
    monkeypatch.setenv("HPCGRADE_PUBLIC_URL", "https://uni.es/hpcgrade/")
    monkeypatch.setenv("HPCGRADE_MAIL_SERVER", "smtp.uni.es")
    monkeypatch.setenv("HPCGRADE_MAIL_FROM", "hpcgrade <noreply@uni.es>")
    monkeypatch.setenv("HPCGRADE_MAIL_STARTTLS", "yes")
    config = load_settings()
    assert config.public_url == "https://uni.es/hpcgrade"
    assert config.mail_port == 25 and config.mail_starttls is True


def test_the_configuration_reference_is_the_settings_own():
    """docs/configuration.md is what `hpcgrade settings` prints: after changing a setting, run
    `hpcgrade settings > docs/configuration.md`."""
    printed = CliRunner().invoke(main, ["settings"])
    assert printed.exit_code == 0
    assert printed.output == REFERENCE.read_text(), "docs/configuration.md is out of date"
    for name in ("SLURM_BATCH_SIZE", "MAIL_FROM", "SANDBOX_REQUIRED_LAYERS"):
        assert f"| `{name}` | `HPCGRADE_{name}` |" in printed.output
    assert "| `[slurm] gpus` | whole number | `1` |" in printed.output


def test_the_app_holds_one_frozen_settings_object_beside_flasks_own_keys(tmp_path):
    app = create_app(
        {
            "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite'}",
            "SECRET_KEY": "s",
            "TESTING": True,
            "LOGIN_LIMITS_STORAGE": "memory://",
            "MAX_UPLOAD_KB": 2,
        }
    )
    settings = app_settings(app)
    assert settings.max_upload_kb == 2 and settings.login_limits_storage == "memory://"
    assert app.config["TESTING"] is True and app.config["SECRET_KEY"] == "s"
    assert app.config["MAX_CONTENT_LENGTH"] == 32 * 2 << 10 and "MAX_UPLOAD_KB" not in app.config
    with app.app_context():
        assert app_settings() is settings
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.max_upload_kb = 3


# a value of each Slurm option, as an admin types it, unlike its default
SLURM_SAMPLES = {
    "partition": "gpu",
    "account": "dl-lab",
    "qos": "teaching",
    "reservation": "lab-tuesday",
    "gpus": "2",
    "cpus": "3",
    "memory": "8G",
    "time": "1:00:00",
    "extra": "--constraint=a100",
}


@pytest.mark.parametrize("option", dataclasses.fields(Resources), ids=lambda o: o.name)
def test_a_slurm_option_declared_once_is_a_setting_a_course_key_and_an_sbatch_option(option):
    """Resources declares each Slurm option; the SLURM_<KEY> setting, a course's Slurm table and
    the job's sbatch options all come from it (an option added there needs a sample here)."""
    setting = {f.name: f for f in dataclasses.fields(Settings)}[f"slurm_{option.name}"]
    assert setting.default == option.default
    assert setting.metadata["parse"] is option.metadata["parse"]
    assert setting.metadata["about"] == option.metadata["about"]
    typed = slurm_with({}, {option.name: SLURM_SAMPLES[option.name]})
    shape = Resources().override(typed, "course x slurm")
    assert getattr(shape, option.name) != option.default
    asked = set(shape.sbatch()) - set(Resources().sbatch())
    assert asked and all(a.startswith("--") for a in asked)
    setting_value = typed[option.name]
    assert load_settings({f"SLURM_{option.name.upper()}": setting_value}).slurm_resources == shape
    assert set(SLURM_KEYS) == {f.name for f in dataclasses.fields(Resources)}
