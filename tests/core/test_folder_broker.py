"""The demo's broker (server/core/folder_broker.py): a consumer in one process and a producer
in another, many large messages. kombu's own filesystem transport lets the consumer read
messages the producer has not finished writing (the demo's worker then stopped with
"Unrecoverable error: JSONDecodeError"); ours hands over each message whole, once."""
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from server.core import folder_broker
from server.core.queue import broker_transport

RACE = Path(__file__).with_name("folder_race.py")
MESSAGES = 30


def race(transport: str, folder: Path) -> dict:
    folder.mkdir()
    side = [sys.executable, str(RACE), transport, str(folder)]
    consumer = subprocess.Popen([*side, "get", str(MESSAGES)], stdout=subprocess.PIPE, text=True)
    time.sleep(0.5)  # the consumer polls the folder before the first message is written
    subprocess.run([*side, "put", str(MESSAGES)], check=True, timeout=120)
    out, _ = consumer.communicate(timeout=120)
    return json.loads(out)


def test_kombus_own_transport_hands_over_half_written_messages(tmp_path):
    assert race("filesystem", tmp_path / "broker")["broken"] > 0


def test_ours_hands_over_every_message_whole_and_once(tmp_path):
    taken = race(folder_broker.TRANSPORT, tmp_path / "broker")
    assert taken == {"whole": list(range(MESSAGES)), "broken": 0}
    assert [p.name for p in (tmp_path / "broker").iterdir()] == []  # nothing left behind


@pytest.mark.parametrize("url, transport", [
    ("filesystem://localhost/", folder_broker.TRANSPORT),
    ("redis://127.0.0.1:6379/0", "server.core.redis_broker:Transport"),
    ("amqp://guest@localhost//", None)])
def test_each_brokers_url_gets_our_mended_transport(url, transport):
    assert broker_transport(url) == transport
