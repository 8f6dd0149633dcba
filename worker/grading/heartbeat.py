"""A Celery worker's heartbeat: proof that it takes messages from the broker, not only that its
process is alive.

Every WORKER_HEARTBEAT_SECONDS the worker's main process sends a message to a queue of its own,
which its consumer takes in the same loop, over the same connection, as it takes its tasks (a
consumer step: no pool slot is needed, so a worker busy grading still beats). When the message
comes back, the heartbeat is written to the database (worker_heartbeats: read by /healthz,
/metrics and `hpcgrade demo`'s supervisor), and systemd's watchdog is told, where systemd
started the worker (deploy/systemd/hpcgrade-worker.service: WatchdogSec restarts a worker whose
heartbeat stops). A message that does not come back is said in the log, and nothing is written:
a worker stuck in kombu, or cut from the broker, ages until someone acts.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import socket
import threading
import time

from celery import bootsteps
from kombu import Consumer, Exchange, Queue
from sqlalchemy import delete

from server.core import conditions
from server.core.config import Settings
from server.core.db import Database
from server.core.models import WorkerHeartbeat, utcnow
from worker.harness.launch import is_stopped

log = logging.getLogger(__name__)
EXCHANGE = Exchange("hpcgrade.heartbeat", type="direct", durable=False)
# a heartbeat this old is a worker gone (or stuck): its row leaves the table a day on, by the
# hourly prune (a worker stopped on purpose removes its own at once)
FORGOTTEN_AFTER = dt.timedelta(days=1)


def heartbeat_step(settings: Settings) -> type[bootsteps.ConsumerStep]:
    """The consumer step that beats for a worker of these settings (its database, its pace)."""
    return type("Heartbeat", (Heartbeat,), {"settings": settings})


class Heartbeat(bootsteps.ConsumerStep):
    """The worker's heartbeat (see the module's docstring), once its consumer has started."""

    settings: Settings

    def __init__(self, consumer, **kwargs):
        super().__init__(consumer, **kwargs)
        self.node = consumer.hostname
        self.queue = Queue(
            f"hpcgrade.heartbeat.{self.node}",
            EXCHANGE,
            routing_key=self.node,
            durable=False,
            auto_delete=True,
        )
        self.back = threading.Condition()
        self.last_back = 0  # the number of the last message that came back
        self.stopped = threading.Event()
        # between the consumer's stop and its start again (a connection lost, a shutdown), no
        # message could come back: none is sent
        self.consuming = threading.Event()
        self.thread: threading.Thread | None = None

    def get_consumers(self, channel):
        return [
            Consumer(
                channel,
                queues=[self.queue],
                callbacks=[self.came_back],
                accept=["json"],
                no_ack=True,
            )
        ]

    def came_back(self, body: dict, _message) -> None:
        with self.back:
            self.last_back = max(self.last_back, int(body.get("number", 0)))
            self.back.notify_all()

    def start(self, consumer) -> None:
        super().start(consumer)  # again after each reconnection: the thread goes on
        self.consuming.set()
        if self.thread is None:
            # unpooled: the pool processes the worker forks later inherit no connection
            self.thread = threading.Thread(
                target=self.beat,
                name="hpcgrade-heartbeat",
                daemon=True,
                args=(
                    consumer,
                    Database(self.settings.database_url, pooled=False),
                    self.settings.worker_heartbeat_seconds,
                ),
            )
            self.thread.start()

    def stop(self, consumer) -> None:
        self.consuming.clear()
        super().stop(consumer)

    def shutdown(self, consumer) -> None:
        """A worker stopped on purpose is not missed: its heartbeat goes."""
        self.stopped.set()
        self.consuming.set()  # the thread waits no more
        with self.back:
            self.back.notify_all()
        if self.thread is not None:
            self.thread.join(timeout=5)
            _forget(self.settings.database_url, self.node)
        super().shutdown(consumer)

    @staticmethod
    def _stopped_pool_processes(consumer) -> list[int]:
        """The pool's processes stopped by a signal: the tasks given them never end (or at their
        hard time limit), while the main process answers its heartbeat on."""
        try:
            processes = consumer.pool.info.get("processes", [])
        except Exception:  # no pool (yet, or any more): nothing stopped in it
            return []
        return [pid for pid in processes if is_stopped(pid)]

    def beat(self, consumer, database: Database, seconds: float) -> None:
        started, number = utcnow(), 0
        while not self.stopped.is_set():
            if not self.consuming.wait(seconds):
                continue
            number += 1
            sent = time.monotonic()
            try:
                with consumer.app.producer_or_acquire() as producer:
                    producer.publish(
                        {"number": number},
                        exchange=EXCHANGE,
                        routing_key=self.node,
                        declare=[self.queue],
                        serializer="json",
                        retry=False,
                    )
            except Exception as exc:  # kombu raises many types for a broker that is away
                log.warning("heartbeat %s not sent: the broker is away (%s)", number, exc)
            else:
                with self.back:
                    self.back.wait_for(
                        lambda number=number: self.last_back >= number or self.stopped.is_set(),
                        timeout=seconds,
                    )
                    came = self.last_back >= number
                stopped = self._stopped_pool_processes(consumer)
                if came and stopped:
                    log.warning(
                        "pool processes %s are stopped: this worker takes no task, its "
                        "heartbeat is not written",
                        stopped,
                    )
                elif came:
                    self._record(database, started, time.monotonic() - sent)
                elif self.consuming.is_set() and not self.stopped.is_set():
                    log.warning(
                        "heartbeat %s did not come back within %.0f s: this worker "
                        "takes nothing from the broker",
                        number,
                        seconds,
                    )
            self.stopped.wait(max(seconds - (time.monotonic() - sent), 0.0))

    def _record(self, database: Database, started: dt.datetime, round_trip: float) -> None:
        notify_systemd(b"READY=1\nWATCHDOG=1")
        try:
            with database.sessions.begin() as session:
                session.merge(
                    WorkerHeartbeat(
                        node=self.node,
                        pid=os.getpid(),
                        started_at=started,
                        beat_at=utcnow(),
                        round_trip=round_trip,
                    )
                )
                conditions.watch_the_schedule(session)
        except Exception as exc:  # the database away: /healthz says so on its own
            log.warning("heartbeat not written: %s", exc)


def _forget(database_url: str, node: str) -> None:
    database = Database(database_url, pooled=False)
    try:
        with database.sessions.begin() as session:
            session.execute(delete(WorkerHeartbeat).where(WorkerHeartbeat.node == node))
    except Exception as exc:
        log.warning("heartbeat of %s left in the database: %s", node, exc)
    finally:
        database.dispose()


def forget_gone(session, now: dt.datetime | None = None) -> int:
    """The heartbeats of workers gone for FORGOTTEN_AFTER leave the table; how many."""
    cutoff = (now or utcnow()) - FORGOTTEN_AFTER
    return session.execute(delete(WorkerHeartbeat).where(WorkerHeartbeat.beat_at < cutoff)).rowcount


def notify_systemd(message: bytes) -> None:
    """Tell systemd (sd_notify(3)), where it started this process with a notify socket."""
    address = os.environ.get("NOTIFY_SOCKET")
    if not address:
        return
    if address.startswith("@"):  # an abstract socket
        address = "\0" + address[1:]
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
            sock.sendto(message, address)
    except OSError as exc:
        log.warning("systemd not told %r: %s", message, exc)
