"""The parsers of setting values: (name, raw value) → value, or a ConfigError that names the
setting and says what it takes. Each parser says in words what it accepts (`accepts`): the type
column of docs/configuration.md."""

from __future__ import annotations

import ipaddress
import json
import re
from email.utils import parseaddr
from typing import Any, Callable
from urllib.parse import urlsplit

from worker.harness.jobs import SANDBOX_LAYERS


class ConfigError(Exception):
    """The configuration is missing something or holds a wrong value; the message says which."""


Parser = Callable[[str, Any], Any]


def accepts(kind: str) -> Callable[[Parser], Parser]:
    """Name what a parser takes, in words: the type column of docs/configuration.md."""

    def mark(parse: Parser) -> Parser:
        parse.kind = kind
        return parse

    return mark


@accepts("text")
def text(name: str, value: Any) -> str:
    if not isinstance(value, str) or not value or any(c in value for c in "\n\r\0"):
        raise ConfigError(f"{name} must be a non-empty line of text, not {value!r}")
    return value


def optional(parse: Parser) -> Parser:
    return accepts(parse.kind)(
        lambda name, value: None if value is None or value == "" else parse(name, value)
    )


@accepts("name (letters, digits, _ . + -)")
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
            raise ConfigError(
                f"{name} must be positive" if minimum == 1 else f"{name} must be at least {minimum}"
            )
        return number

    return accepts("whole number" if minimum == 0 else f"whole number, at least {minimum}")(parse)


@accepts("seconds")
def seconds(name: str, value: Any) -> float:
    try:
        number = float(value) if not isinstance(value, bool) else -1.0
    except (TypeError, ValueError):
        number = -1.0
    if not number >= 0:
        raise ConfigError(f"{name} must be a number of seconds, not {value!r}")
    return number


@accepts("table")
def table(name: str, value: Any) -> dict:
    if isinstance(value, str):
        value = _json(name, value)
    if not isinstance(value, dict):
        raise ConfigError(f"{name} must be a table")
    return value


@accepts("list of text")
def strings(name: str, value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        value = _json(name, value)
    if not isinstance(value, (list, tuple)):
        raise ConfigError(f'{name} must be a list of strings, like ["a", "b"]')
    return tuple(text(f"{name} item", item) for item in value)


@accepts("list of addresses or networks")
def networks(name: str, value: Any) -> tuple[str, ...]:
    listed = strings(name, value)
    for network in listed:
        try:
            ipaddress.ip_network(network, strict=False)
        except ValueError:
            raise ConfigError(
                f"{name}: {network!r} is not an address or a network like 10.1.0.0/16"
            ) from None
    return listed


@accepts(f"list of layers: {', '.join(SANDBOX_LAYERS)}")
def sandbox_layers(name: str, value: Any) -> tuple[str, ...]:
    layers = strings(name, value)
    unknown = sorted(set(layers) - set(SANDBOX_LAYERS))
    if unknown:
        raise ConfigError(
            f"{name}: unknown layers {', '.join(unknown)}; known: {', '.join(SANDBOX_LAYERS)}"
        )
    return layers


@accepts("list of sbatch options")
def sbatch_options(name: str, value: Any) -> tuple[str, ...]:
    options = strings(name, value)
    for option in options:
        if not option.startswith("--") or " " in option.split("=", 1)[0]:
            raise ConfigError(f"{name}: {option!r} is not an sbatch option like --constraint=a100")
    return options


@accepts("memory: MB, or 4G, 4096M")
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


@accepts("time: minutes, or M:S, H:M:S, D-H:M:S")
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

    return accepts(" or ".join(f"`{option}`" for option in options))(parse)


def choices(options: tuple[str, ...]) -> Callable[[str, Any], tuple[str, ...]]:
    def parse(name: str, value: Any) -> tuple[str, ...]:
        picked = strings(name, value)
        wrong = [item for item in picked if item not in options]
        if wrong or not picked:
            raise ConfigError(
                f"{name} must list one or more of {', '.join(options)}, not {value!r}"
            )
        return picked

    return accepts("list of " + ", ".join(f"`{option}`" for option in options))(parse)


@accepts("LDAP URL")
def ldap_address(name: str, value: Any) -> str:
    """ldap://host[:port] or ldaps://host[:port], nothing after it."""
    parts = urlsplit(text(name, value))
    if (
        parts.scheme not in ("ldap", "ldaps")
        or not parts.hostname
        or parts.path.strip("/")
        or parts.query
        or parts.fragment
    ):
        raise ConfigError(f"{name} must be an address like ldaps://ldap.uni.es, not {value!r}")
    return value.rstrip("/")


@accepts("true or false")
def flag(name: str, value: Any) -> bool:
    """true or false; in the environment also 1/0, yes/no, on/off."""
    words = {
        "true": True,
        "1": True,
        "yes": True,
        "on": True,
        "false": False,
        "0": False,
        "no": False,
        "off": False,
    }
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in words:
        return words[value.strip().lower()]
    raise ConfigError(f"{name} must be true or false, not {value!r}")


@accepts("time zone")
def time_zone(name: str, value: Any) -> str:
    """An IANA time zone name: Europe/Madrid, America/Bogota, UTC."""
    import zoneinfo

    try:
        zoneinfo.ZoneInfo(value)
    except (TypeError, ValueError, zoneinfo.ZoneInfoNotFoundError):
        raise ConfigError(f"{name} must be a time zone like Europe/Madrid, not {value!r}") from None
    return value


@accepts("limits: N per minute; M per hour")
def rate_limits(name: str, value: Any) -> str:
    """Limits in Flask-Limiter's notation: "5 per minute; 20 per hour"."""
    from limits import parse_many  # not at import: the grading side never needs it

    try:
        if isinstance(value, str) and parse_many(value):
            return value
    except ValueError:
        pass
    raise ConfigError(f'{name} must be limits like "5 per minute; 20 per hour", not {value!r}')


@accepts("http(s) address")
def web_address(name: str, value: Any) -> str:
    """Where people reach the portal: https://grader.uni.es or https://uni.es/hpcgrade (no
    trailing slash kept)."""
    parts = urlsplit(text(name, value))
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.query or parts.fragment:
        raise ConfigError(
            f"{name} must be an http(s) address like https://grader.uni.es, not {value!r}"
        )
    return value.rstrip("/")


@accepts("mail address")
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
