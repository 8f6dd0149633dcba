"""The Redis transport's mend (server/core/redis_broker.py): a message acknowledged through the
channel of a connection that was closed (a task that ended after the worker lost Redis and
connected again) raises in the worker's event loop with kombu's own transport, and is left as
it is with ours. Against the real Redis of scripts/services."""

import uuid

import pytest
from kombu import Connection, Exchange, Queue

from server.core import redis_broker

pytestmark = pytest.mark.services
URL = "redis://127.0.0.1:6379/9"


def message_of_a_closed_connection(transport: str, channel_closed: bool = False):
    """A message delivered by a connection that was then closed as Celery closes the one it
    replaces (its transport's client gone, its channel's pools disconnected), with that channel;
    `channel_closed`: the channel closed too (kombu then takes the channel's connection away)."""
    queue = Queue(name := f"mend-{uuid.uuid4().hex}", Exchange(name), routing_key=name)
    with Connection(URL) as producer:
        producer.Producer().publish(
            {"n": 1}, exchange=queue.exchange, routing_key=name, declare=[queue]
        )
    connection = Connection(URL, transport=transport)
    channel, got = connection.channel(), []
    connection.Consumer(
        queue, channel=channel, callbacks=[lambda _body, m: got.append(m)]
    ).consume()
    connection.drain_events(timeout=5)
    if channel_closed:
        channel.qos.restore_at_shutdown = False  # the message stays delivered, as Redis restarted
        channel.close()
    connection._do_close_transport()
    channel._disconnect_pools()
    return got[0]


@pytest.mark.parametrize("channel_closed", [False, True])
def test_kombus_own_transport_raises_on_such_an_ack(channel_closed):
    message = message_of_a_closed_connection("redis", channel_closed)
    message.channel.qos.restore_at_shutdown = False  # it would raise again, at exit
    with pytest.raises(AttributeError):
        message.ack()


@pytest.mark.parametrize("channel_closed", [False, True])
def test_ours_leaves_the_message_and_says_so(caplog, channel_closed):
    """Its channel closed too: seen in CI after the fault suite's Redis restart (the worker's
    log ended with the AttributeError, and no task ran again)."""
    message = message_of_a_closed_connection(redis_broker.TRANSPORT, channel_closed)
    message.ack()
    assert "left as it is" in caplog.text
    message_of_a_closed_connection(redis_broker.TRANSPORT, channel_closed).reject(requeue=True)
