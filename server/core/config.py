"""Configuration: defaults, then a TOML file named by HPCGRADE_CONFIG, then HPCGRADE_* variables.

Every setting has a type and is parsed and validated here, once: a wrong name or value stops
start-up with a message naming it. In the TOML file a `[slurm]` table stands for the SLURM_*
settings (`[slurm] gpus = 1` is SLURM_GPUS); in the environment a list is a JSON array.
"""
from __future__ import annotations

import dataclasses
import json
import os
import re
import tomllib
from dataclasses import dataclass
from email.utils import parseaddr
from pathlib import Path
from typing import Any, Callable
from urllib.parse import urlsplit

from worker.harness.jobs import REQUIRED_LAYERS, SANDBOX_LAYERS

ROOT = Path(__file__).resolve().parents[2]
EXECUTOR_NAMES = ("local", "slurm")


class ConfigError(Exception):
    """The configuration is missing something or holds a wrong value; the message says which."""


# --- parsers: (name, raw value) → value, or ConfigError ---------------------------------------

def text(name: str, value: Any) -> str:
    if not isinstance(value, str) or not value or any(c in value for c in "\n\r\0"):
        raise ConfigError(f"{name} must be a non-empty line of text, not {value!r}")
    return value


def optional(parse: Callable[[str, Any], Any]) -> Callable[[str, Any], Any]:
    return lambda name, value: None if value is None or value == "" else parse(name, value)


def word(name: str, value: Any) -> str:
    """A Slurm name (partition, account, QOS, course): no spaces, nothing a shell would read."""
    if not isinstance(value, str) or not re.fullmatch(r"[A-Za-z0-9_.+-]+", value):
        raise ConfigError(f"{name} must be a name of letters, digits and _ . + -, not {value!r}")
    return value


def whole(minimum: int) -> Callable[[str, Any], int]:
    def parse(name: str, value: Any) -> int:
        try:
            number = int(value) if not isinstance(value, (bool, float)) else None
        except (TypeError, ValueError):
            number = None
        if number is None:
            raise ConfigError(f"{name} must be a whole number, not {value!r}")
        if number < minimum:
            raise ConfigError(f"{name} must be positive" if minimum == 1
                              else f"{name} must be at least {minimum}")
        return number
    return parse


def seconds(name: str, value: Any) -> float:
    try:
        number = float(value) if not isinstance(value, bool) else -1.0
    except (TypeError, ValueError):
        number = -1.0
    if not number >= 0:
        raise ConfigError(f"{name} must be a number of seconds, not {value!r}")
    return number


def table(name: str, value: Any) -> dict:
    if isinstance(value, str):
        value = _json(name, value)
    if not isinstance(value, dict):
        raise ConfigError(f"{name} must be a table")
    return value


def strings(name: str, value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        value = _json(name, value)
    if not isinstance(value, (list, tuple)):
        raise ConfigError(f"{name} must be a list of strings, like [\"a\", \"b\"]")
    return tuple(text(f"{name} item", item) for item in value)


def sandbox_layers(name: str, value: Any) -> tuple[str, ...]:
    layers = strings(name, value)
    unknown = sorted(set(layers) - set(SANDBOX_LAYERS))
    if unknown:
        raise ConfigError(f"{name}: unknown layers {', '.join(unknown)}; known: "
                          f"{', '.join(SANDBOX_LAYERS)}")
    return layers


def sbatch_options(name: str, value: Any) -> tuple[str, ...]:
    options = strings(name, value)
    for option in options:
        if not option.startswith("--") or " " in option.split("=", 1)[0]:
            raise ConfigError(f"{name}: {option!r} is not an sbatch option like --constraint=a100")
    return options


def memory_mb(name: str, value: Any) -> int:
    """Slurm's memory notation: 4096 (MB), 4096M, 4G, 1T."""
    match = re.fullmatch(r"(\d+)\s*([KMGT]?)B?", str(value).strip().upper())
    if isinstance(value, bool) or not match:
        raise ConfigError(f"{name} must be an amount of memory like 4G or 4096M, not {value!r}")
    number, unit = int(match[1]), match[2] or "M"
    megabytes = {"K": number // 1024, "M": number, "G": number << 10, "T": number << 20}[unit]
    if megabytes < 1:
        raise ConfigError(f"{name} must be at least 1M")
    return megabytes


def minutes(name: str, value: Any) -> int:
    """Slurm's time notation: minutes, M:S, H:M:S, D-H, D-H:M, D-H:M:S; rounded up to minutes."""
    if isinstance(value, int) and not isinstance(value, bool):
        found = value
    else:
        found = slurm_minutes(str(value))
    if found is None or found < 1:
        raise ConfigError(f"{name} must be a time like 30, 1:30:00 or 1-00:00:00, not {value!r}")
    return found


def slurm_minutes(value: str) -> int | None:
    """Minutes in a Slurm time string (what sbatch --time takes, what scontrol prints), or None."""
    match = re.fullmatch(r"(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?", value.strip())
    if not match:
        return None
    days, first, second, third = (int(g) if g else None for g in match.groups())
    if days is not None:  # D-H, D-H:M, D-H:M:S
        total = days * 86400 + first * 3600 + (second or 0) * 60 + (third or 0)
    elif third is not None:  # H:M:S
        total = first * 3600 + second * 60 + third
    elif second is not None:  # M:S
        total = first * 60 + second
    else:
        total = first * 60
    return -(-total // 60)


def choice(options: tuple[str, ...]) -> Callable[[str, Any], str]:
    def parse(name: str, value: Any) -> str:
        if value not in options:
            raise ConfigError(f"{name} must be one of {', '.join(options)}, not {value!r}")
        return value
    return parse


def flag(name: str, value: Any) -> bool:
    """true or false; in the environment also 1/0, yes/no, on/off."""
    words = {"true": True, "1": True, "yes": True, "on": True,
             "false": False, "0": False, "no": False, "off": False}
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in words:
        return words[value.strip().lower()]
    raise ConfigError(f"{name} must be true or false, not {value!r}")


def time_zone(name: str, value: Any) -> str:
    """An IANA time zone name: Europe/Madrid, America/Bogota, UTC."""
    import zoneinfo
    try:
        zoneinfo.ZoneInfo(value)
    except (TypeError, ValueError, zoneinfo.ZoneInfoNotFoundError):
        raise ConfigError(f"{name} must be a time zone like Europe/Madrid, not {value!r}") from None
    return value


def rate_limits(name: str, value: Any) -> str:
    """Limits in Flask-Limiter's notation: "5 per minute; 20 per hour"."""
    from limits import parse_many  # not at import: the grading side never needs it
    try:
        if isinstance(value, str) and parse_many(value):
            return value
    except ValueError:
        pass
    raise ConfigError(f"{name} must be limits like \"5 per minute; 20 per hour\", not {value!r}")


def web_address(name: str, value: Any) -> str:
    """Where people reach the portal: https://grader.uni.es or https://uni.es/hpcgrade (no
    trailing slash kept)."""
    parts = urlsplit(text(name, value))
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.query \
            or parts.fragment:
        raise ConfigError(f"{name} must be an http(s) address like https://grader.uni.es, "
                          f"not {value!r}")
    return value.rstrip("/")


def mail_address(name: str, value: Any) -> str:
    """An address mail is sent from: noreply@uni.es or "hpcgrade <noreply@uni.es>"."""
    if not isinstance(value, str) or "@" not in parseaddr(value)[1] or "\n" in value:
        raise ConfigError(f"{name} must be a mail address like noreply@uni.es, not {value!r}")
    return value


def _json(name: str, value: str) -> Any:
    try:
        return json.loads(value)
    except json.JSONDecodeError:
        raise ConfigError(f"{name} must be written as JSON here, not {value!r}") from None


# --- what one Slurm job asks for ----------------------------------------------------------------

@dataclass(frozen=True)
class Resources:
    """A job's shape: the service's SLURM_* defaults, overridden per exercise by `[slurm]`.

    Runs with equal shapes can share a job; a shape with `gpus = 0` never holds a GPU."""

    partition: str | None = None
    account: str | None = None
    qos: str | None = None
    gpus: int = 1
    cpus: int = 2
    memory: int = 4096  # MB
    time: int = 30  # minutes
    extra: tuple[str, ...] = ()

    def override(self, overrides: dict, where: str) -> "Resources":
        return dataclasses.replace(self, **self.parse_overrides(overrides, where))

    @staticmethod
    def parse_overrides(overrides: dict, where: str) -> dict[str, Any]:
        """The values of a `[slurm]`-like table, parsed: what `dataclasses.replace` takes."""
        unknown = set(overrides) - set(RESOURCE_PARSERS)
        if unknown:
            raise ConfigError(f"{where}: unknown keys {', '.join(sorted(unknown))}; valid keys are "
                              f"{', '.join(RESOURCE_PARSERS)}")
        return {key: RESOURCE_PARSERS[key](f"{where} {key}", value)
                for key, value in overrides.items()}


RESOURCE_PARSERS: dict[str, Callable[[str, Any], Any]] = {
    "partition": optional(word), "account": optional(word), "qos": optional(word),
    "gpus": whole(0), "cpus": whole(1), "memory": memory_mb, "time": minutes,
    "extra": sbatch_options,
}

# --- the settings -------------------------------------------------------------------------------

SETTINGS: dict[str, tuple[Any, Callable[[str, Any], Any]]] = {
    "DATABASE_URL": (f"sqlite:///{ROOT / 'instance' / 'hpcgrade.sqlite'}", text),
    "BROKER_URL": ("redis://127.0.0.1:6379/0", text),
    "SECRET_KEY": (None, optional(text)),
    "MAX_UPLOAD_KB": (1024, whole(1)),
    "SUBMISSIONS_PER_WINDOW": (20, whole(1)),
    "SUBMISSION_WINDOW_MINUTES": (60, whole(1)),
    # log-in: a session ends this long after its last request (or at log-out, everywhere)
    "SESSION_LIFETIME_HOURS": (12, whole(1)),
    # deadlines and submission times are shown in the course's time zone, stored in UTC
    "TIMEZONE": ("UTC", time_zone),
    "SESSION_COOKIE_SECURE": (True, flag),  # false only where the portal is reached over http
    "SESSION_COOKIE_SAMESITE": ("Lax", choice(("Lax", "Strict"))),
    # failed log-ins counted per account and per client address; over a limit, the next attempt
    # is refused until the window frees up (the longer windows make the back-off)
    "LOGIN_LIMITS_PER_ACCOUNT": ("5 per minute; 20 per hour", rate_limits),
    "LOGIN_LIMITS_PER_ADDRESS": ("30 per minute; 300 per hour", rate_limits),
    "LOGIN_LIMITS_STORAGE": (None, optional(text)),  # default: the broker's Redis
    "PASSWORD_CHECKS_PER_PROCESS": (2, whole(1)),  # at once; more are refused with a 429
    "TRUSTED_PROXIES": (0, whole(0)),  # proxies in front that set X-Forwarded-For (nginx: 1)
    "TOKEN_LIFETIME_DAYS": (120, whole(1)),
    # a new account's link to set its password (also one a staff reset gives) works once, and
    # for this long
    "SET_PASSWORD_LINK_DAYS": (14, whole(1)),
    # the portal's address as people reach it, for those links; unset, a page builds them from
    # the address its request came to, and `hpcgrade users import` prints paths
    "PUBLIC_URL": (None, optional(web_address)),
    # mail (the set-password links): unset MAIL_SERVER, nothing is mailed
    "MAIL_SERVER": (None, optional(text)),
    "MAIL_PORT": (25, whole(1)),
    "MAIL_FROM": (None, optional(mail_address)),
    "MAIL_USERNAME": (None, optional(text)),
    "MAIL_PASSWORD": (None, optional(text)),
    "MAIL_STARTTLS": (False, flag),
    # sending a task fails at once while the broker is away: the submission is already committed
    # and the reconcile task sends it later, so a web request never hangs on Redis
    "BROKER_TRANSPORT_OPTIONS": ({"max_retries": 0}, table),
    "EXECUTOR": ("local", choice(EXECUTOR_NAMES)),
    "COURSE_PYTHON": (None, optional(text)),
    "COURSE": ("hpcgrade", word),
    "SPOOL_DIR": (str(ROOT / "instance" / "spool"), text),
    # below this, dispatch sends nothing: a job in a full spool cannot write its reports, and
    # would use a try of each of its runs for nothing
    "SPOOL_MIN_FREE_MB": (512, whole(0)),
    # job logs, dead pilots' folders and runs' folders left behind leave the spool this many
    # days after their last change (hourly; worker/grading/spool_prune.py)
    "SPOOL_KEEP_DAYS": (14, whole(1)),
    "GRADING_LEASE_SECONDS": (900, whole(1)),
    # one grading slot per student at a time: a student flooding the queue (or looping until the
    # time-out) holds one slot, never all of them; the next file of theirs waits its turn
    "MAX_RUNNING_PER_STUDENT": (1, whole(1)),
    "REQUEUE_AFTER_SECONDS": (120, whole(1)),
    # reports are read this often (one listing of the spool's done/ folder); the cluster is
    # asked about jobs every SLURM_POLL_SECONDS
    "COLLECT_SECONDS": (1.0, seconds),
    **{f"SLURM_{key.upper()}": (getattr(Resources, key), parse)
       for key, parse in RESOURCE_PARSERS.items()},
    "SLURM_MODULES": ((), strings),
    "SLURM_BATCH_SIZE": (20, whole(1)),
    "SLURM_BATCH_WAIT": (3.0, seconds),
    "SLURM_POLL_SECONDS": (5.0, seconds),
    # a job the cluster has not started by then (a node drained, a partition down) is cancelled,
    # its runs a grader error, "cluster unavailable"
    "SLURM_PENDING_LIMIT_SECONDS": (3600, whole(1)),
    "SLURM_SUBMIT_HOST": (None, optional(text)),
    "SLURM_SSH_OPTIONS": ((), strings),
    # sandbox layers without which a node grades nothing (a grader error naming them, never a
    # zero); "filesystem" is either of mount-namespace and landlock
    "SANDBOX_REQUIRED_LAYERS": (REQUIRED_LAYERS, sandbox_layers),
}


def load_config(overrides: dict | None = None) -> dict:
    raw = {name: default for name, (default, _) in SETTINGS.items()}
    path = os.environ.get("HPCGRADE_CONFIG")
    if path:
        raw.update(_read_file(path))
    for name in SETTINGS:
        if f"HPCGRADE_{name}" in os.environ:
            raw[name] = os.environ[f"HPCGRADE_{name}"]
    raw.update(overrides or {})
    unknown = set(raw) - set(SETTINGS) - {"TESTING"}
    if unknown:
        raise ConfigError(f"unknown settings: {', '.join(sorted(unknown))}")
    config = {name: SETTINGS[name][1](name, value) if name in SETTINGS else value
              for name, value in raw.items()}
    if config["MAIL_SERVER"] and not config["MAIL_FROM"]:
        raise ConfigError("MAIL_SERVER is set: set MAIL_FROM too (the address mail comes from)")
    return config


def _read_file(path: str) -> dict:
    try:
        with open(path, "rb") as f:
            data = tomllib.load(f)
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"HPCGRADE_CONFIG={path}: {exc}") from None
    slurm = data.pop("slurm", {})
    if not isinstance(slurm, dict):
        raise ConfigError(f"HPCGRADE_CONFIG={path}: slurm must be a table")
    return {**{k.upper(): v for k, v in data.items()},
            **{f"SLURM_{k.upper()}": v for k, v in slurm.items()}}


def slurm_resources(config: dict) -> Resources:
    """The service's default job shape, from the validated SLURM_* settings."""
    return Resources(**{key: config[f"SLURM_{key.upper()}"] for key in RESOURCE_PARSERS})
