"""kombu's Redis transport, with one defect of kombu 5.7 mended.

A task acknowledged late (task_acks_late) that ends after the worker lost Redis and connected
again is acknowledged through the channel of the connection it came by, which Celery closed:
kombu then raises AttributeError ('NoneType' object has no attribute 'hostname', or 'client'
where the channel was closed too) inside the worker's event loop, and the worker takes no task
again (tests/service/test_faults.py saw both after a Redis restart). Such an acknowledgement
cannot be made: the message's record of being delivered went with that connection (and with
Redis, restarted). It is dropped and logged; the run is settled in the database already, and
a message delivered again finds its submission graded."""

from __future__ import annotations

import logging

from kombu.transport import redis

log = logging.getLogger(__name__)
TRANSPORT = f"{__name__}:Transport"  # Celery's broker_transport, for a redis:// broker


class QoS(redis.QoS):
    def ack(self, delivery_tag):
        if self._closed():
            _left()
            return
        super().ack(delivery_tag)

    def reject(self, delivery_tag, requeue=False):
        if self._closed():
            _left()
            return
        super().reject(delivery_tag, requeue)

    def restore_unacked(self, client=None):
        """At the worker's exit too: nothing to restore through a closed connection."""
        if self._closed():
            return None
        return super().restore_unacked(client)

    def _closed(self) -> bool:
        # the connection's transport lost its client; or the channel was closed, and kombu
        # took the transport from it (the worker's log then ended in `self.connection.client`)
        transport = self.channel.connection
        return transport is None or transport.client is None


def _left() -> None:
    log.warning(
        "a message of a connection to Redis that was closed is left as it is (its "
        "task ended after Redis was lost and found again)"
    )


class Channel(redis.Channel):
    QoS = QoS


class Transport(redis.Transport):
    Channel = Channel
