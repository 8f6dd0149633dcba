"""Configuration: defaults, then a TOML file named by HPCGRADE_CONFIG, then HPCGRADE_* variables."""
from __future__ import annotations

import os
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

DEFAULTS = {
    "DATABASE_URL": f"sqlite:///{ROOT / 'instance' / 'hpcgrade.sqlite'}",
    "BROKER_URL": "redis://127.0.0.1:6379/0",
    "SECRET_KEY": None,
    "MAX_UPLOAD_KB": 1024,
    "SUBMISSIONS_PER_WINDOW": 20,
    "SUBMISSION_WINDOW_MINUTES": 60,
    # sending a task fails at once while the broker is away: the submission is already committed
    # and the reconcile task sends it later, so a web request never hangs on Redis
    "BROKER_TRANSPORT_OPTIONS": {"max_retries": 0},
    "EXECUTOR": "local",
    "COURSE_PYTHON": None,
    "GRADING_LEASE_SECONDS": 900,
    "REQUEUE_AFTER_SECONDS": 120,
}


class ConfigError(Exception):
    """The configuration is missing something or holds a wrong value; the message says which."""


def load_config(overrides: dict | None = None) -> dict:
    config = dict(DEFAULTS)
    path = os.environ.get("HPCGRADE_CONFIG")
    if path:
        try:
            with open(path, "rb") as f:
                config.update({k.upper(): v for k, v in tomllib.load(f).items()})
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise ConfigError(f"HPCGRADE_CONFIG={path}: {exc}") from None
    for key in DEFAULTS:
        if f"HPCGRADE_{key}" in os.environ:
            config[key] = os.environ[f"HPCGRADE_{key}"]
    config.update(overrides or {})
    unknown = set(config) - set(DEFAULTS) - {"TESTING"}
    if unknown:
        raise ConfigError(f"unknown settings: {', '.join(sorted(unknown))}")
    for key in ("MAX_UPLOAD_KB", "SUBMISSIONS_PER_WINDOW", "SUBMISSION_WINDOW_MINUTES",
                "GRADING_LEASE_SECONDS", "REQUEUE_AFTER_SECONDS"):
        try:
            config[key] = int(config[key])
        except (TypeError, ValueError):
            raise ConfigError(f"{key} must be a whole number, not {config[key]!r}") from None
        if config[key] <= 0:
            raise ConfigError(f"{key} must be positive")
    from worker.executors import EXECUTORS
    if config["EXECUTOR"] not in EXECUTORS:
        raise ConfigError(f"EXECUTOR must be one of {', '.join(EXECUTORS)}, not {config['EXECUTOR']!r}")
    return config
