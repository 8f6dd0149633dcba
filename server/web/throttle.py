"""Log-in throttling: tries are counted per account (before the check, so that tries at once
cannot pass the limit together) and failures per client address, with the `limits` library
(Flask-Limiter's engine) on Redis; over a limit, an attempt is refused with 429 and Retry-After
before any password is hashed, so one client's guessing costs the portal at most the address
limits' worth of hashing. A threaded worker also checks at most PASSWORD_CHECKS_PER_PROCESS
passwords at once (a sync worker checks one by construction). A log-in through the directory
(server/web/ldap_login.py) counts against the same limits."""

from __future__ import annotations

import ipaddress
import logging
import math
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable, TypeVar

from flask import Flask, current_app, request
from flask_babel import gettext as _
from limits import RateLimitItem, parse_many
from limits.errors import ConfigurationError, StorageError
from limits.storage import MemoryStorage, storage_from_string
from limits.strategies import MovingWindowRateLimiter
from sqlalchemy.orm import Session

from server.core.config import ConfigError, app_settings
from server.core.models import User
from server.core.users import authenticate, spend_a_password_check
from server.web.ldap_login import directory_user, through_directory

CHECK_WAIT_SECONDS = 0.5  # for a free password check, before refusing as busy
REDIS_SECONDS = 0.5  # a Redis that does not answer delays a log-in this long, then memory counts
log = logging.getLogger(__name__)
T = TypeVar("T")


class Throttled(Exception):
    """A log-in refused before its password was checked: wait `seconds`."""

    def __init__(self, seconds: int, busy: bool = False):
        super().__init__(f"throttled for {seconds} s")
        self.seconds, self.busy = seconds, busy

    @property
    def headers(self) -> dict[str, str]:
        return {"Retry-After": str(self.seconds)}

    @property
    def message(self) -> str:
        if self.busy:
            return _("The server is checking many passwords just now; try again in a moment.")
        wait = f"{self.seconds} s" if self.seconds < 120 else f"{math.ceil(self.seconds / 60)} min"
        return _("Too many failed log-ins; try again in %(wait)s.", wait=wait)


@dataclass
class LoginThrottle:
    prefix: str  # the course: services that share a Redis keep their own counts
    limits: dict[str, list[RateLimitItem]]  # "account" or "address" → its limits
    counters: MovingWindowRateLimiter
    fallback: MovingWindowRateLimiter  # this process's memory, while Redis cannot be reached
    checks: threading.BoundedSemaphore

    def _counted(self, action: Callable[[MovingWindowRateLimiter], T]) -> T:
        try:
            return action(self.counters)
        except StorageError as exc:
            log.warning("log-in limits counted in memory: their storage failed (%s)", exc)
            return action(self.fallback)

    def wait_seconds(self, keys: dict[str, str]) -> int:
        """Seconds until every limit of these keys has room again; 0: it has now."""

        def longest(counters: MovingWindowRateLimiter) -> float:
            now, waits = time.time(), [0.0]
            for scope, key in keys.items():
                for item in self.limits[scope]:
                    stats = counters.get_window_stats(item, self.prefix, scope, key)
                    if stats.remaining <= 0:
                        waits.append(stats.reset_time - now)
            return max(waits)

        wait = self._counted(longest)
        return max(1, math.ceil(wait)) if wait > 0 else 0

    def take_account_try(self, keys: dict[str, str]) -> bool:
        """Count a try against the account before its password is checked, in one step per
        limit: of many tries at once, no more pass than the limits allow. False: no room."""

        def take(counters: MovingWindowRateLimiter) -> bool:
            return all(
                [
                    counters.hit(item, self.prefix, "account", keys["account"])
                    for item in self.limits["account"]
                ]
            )

        return self._counted(take)

    def record(self, keys: dict[str, str], failed: bool) -> None:
        """After the check: a failure counts against the address too; a success forgets the
        account's tries."""

        def count(counters: MovingWindowRateLimiter) -> None:
            if failed:
                for item in self.limits["address"]:
                    counters.hit(item, self.prefix, "address", keys["address"])
            else:
                for item in self.limits["account"]:
                    counters.clear(item, self.prefix, "account", keys["account"])

        self._counted(count)


def init_app(app: Flask) -> None:
    settings = app_settings(app)
    try:
        storage = storage_from_string(
            settings.login_limits_storage or settings.broker_url,
            wrap_exceptions=True,
            socket_timeout=REDIS_SECONDS,
            socket_connect_timeout=REDIS_SECONDS,
        )
    except ConfigurationError:  # the message would show the URL, and its password
        raise ConfigError(
            "LOGIN_LIMITS_STORAGE (by default the broker's URL) must be a "
            "redis:// URL, or memory:// for one process"
        ) from None
    app.extensions["hpcgrade.throttle"] = LoginThrottle(
        prefix=settings.course,
        limits={
            "account": parse_many(settings.login_limits_per_account),
            "address": parse_many(settings.login_limits_per_address),
        },
        counters=MovingWindowRateLimiter(storage),
        fallback=MovingWindowRateLimiter(MemoryStorage()),
        checks=threading.BoundedSemaphore(settings.password_checks_per_process),
    )


def client_address() -> str:
    """The client's address (behind TRUSTED_PROXIES, the one they saw); IPv6 by /64, which one
    subscriber holds whole."""
    address = request.remote_addr or "unknown"
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return address
    if ip.version == 6 and ip.ipv4_mapped is None:
        return str(ipaddress.ip_network(f"{ip}/64", strict=False))
    return str(getattr(ip, "ipv4_mapped", None) or ip)


def check_password(session: Session, username: str, password: str) -> User | None:
    """The user if the password is theirs, else None (a failure, counted). Raises Throttled,
    before any hashing, while the account or the address is over its limits or while this
    process is already checking as many passwords as it may."""
    throttle: LoginThrottle = current_app.extensions["hpcgrade.throttle"]
    keys = {"account": username.strip().lower()[:64], "address": client_address()}
    wait = throttle.wait_seconds(keys)
    if wait:
        raise Throttled(wait)
    if not throttle.take_account_try(keys):  # another try took the last room meanwhile
        raise Throttled(max(1, throttle.wait_seconds(keys)))
    if through_directory(session, username):
        # a hash's work as a local log-in does, then the directory, outside the bounded checks:
        # a slow directory must not hold every check of the process (a local admin's too)
        with _password_check(throttle):
            spend_a_password_check(password)
        user = directory_user(session, username, password)  # an outage is no failed guess
    else:
        with _password_check(throttle):
            user = authenticate(session, username, password)
    throttle.record(keys, failed=user is None)
    return user


@contextmanager
def _password_check(throttle: LoginThrottle) -> Iterator[None]:
    """One of the password checks this process runs at once; Throttled (busy) if none is
    free."""
    if not throttle.checks.acquire(timeout=CHECK_WAIT_SECONDS):
        raise Throttled(1, busy=True)
    try:
        yield
    finally:
        throttle.checks.release()
