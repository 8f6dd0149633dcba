"""The submission page's long poll: its status request names the state the page shows, and is
held until the submission leaves it, so that a result is on the page the moment it is stored
rather than at the next poll.

A held request holds a thread. Only a server that runs requests in threads holds any (gunicorn's
gthread workers, as deployed: deploy/systemd/hpcgrade-portal.service), and each process holds at
most HELD_PER_PROCESS at once, fewer than its threads, so that pages and the API always have
threads left; beyond that, or under sync workers, the answer comes at once and the page asks
again a second later, as a plain poll.
"""

from __future__ import annotations

import threading
import time
from typing import Callable, TypeVar

State = TypeVar("State")

HOLD_SECONDS = 4.0  # then the page asks again: a queued one gets a fresh place and estimate
CHECK_EVERY = 0.1  # one primary-key read; a result is seen at most this long after it is stored
HELD_PER_PROCESS = 8  # deploy/systemd runs 16 threads a process
_held = threading.BoundedSemaphore(HELD_PER_PROCESS)


def once_changed(
    state: State,
    read: Callable[[], State],
    status_of: Callable[[State], str],
    shown: str | None,
    threaded: bool,
) -> State:
    """`state`, or a newer one read again every CHECK_EVERY while its status is still `shown`
    (the page's), for up to HOLD_SECONDS; at once when the page shows another status, when the
    server has no threads to spare, or when `shown` is None (a plain poll)."""
    if (
        shown is None
        or not threaded
        or status_of(state) != shown
        or not _held.acquire(blocking=False)
    ):
        return state
    try:
        deadline = time.monotonic() + HOLD_SECONDS
        while status_of(state) == shown and time.monotonic() < deadline:
            time.sleep(CHECK_EVERY)
            state = read()
    finally:
        _held.release()
    return state
