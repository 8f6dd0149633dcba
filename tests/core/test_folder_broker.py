"""The demo's broker (server/core/folder_broker.py): a consumer in one process and a producer
in another, many large messages. kombu's own filesystem transport lets the consumer read
messages the producer has not finished writing (the demo's worker then stopped with
"Unrecoverable error: JSONDecodeError"); ours hands over each message whole, once."""

import json
import os
import shutil
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


@pytest.mark.parametrize(
    "url, transport",
    [
        ("filesystem://localhost/", folder_broker.TRANSPORT),
        ("redis://127.0.0.1:6379/0", "server.core.redis_broker:Transport"),
        ("amqp://guest@localhost//", None),
    ],
)
def test_each_brokers_url_gets_our_mended_transport(url, transport):
    assert broker_transport(url) == transport


def folder_queue(folder: Path, name: str):
    """A queue of its own name (kombu's filesystem transport keeps the exchanges it declared
    in the process, whatever their folder)."""
    from kombu import Connection

    connection = Connection(
        "filesystem://",
        transport=folder_broker.TRANSPORT,
        transport_options={
            "data_folder_in": str(folder / "messages"),
            "data_folder_out": str(folder / "messages"),
            "control_folder": str(folder / "control"),
        },
    )
    return connection, connection.SimpleQueue(name, serializer="json")


def test_a_file_that_is_no_message_is_set_aside_and_the_queue_goes_on(tmp_path, caplog):
    """kombu's worker stopped on it ("Unrecoverable error") and the file was gone unsaid."""
    connection, queue = folder_queue(tmp_path, "junk")
    with connection:
        (tmp_path / "messages" / "0000001_junk.junk.msg").write_text("not json")
        queue.put({"n": 1})
        assert queue.get(timeout=5).payload == {"n": 1}
    assert (tmp_path / "messages-rejected" / "0000001_junk.junk.msg").read_text() == "not json"
    assert "0000001_junk.junk.msg is no message" in caplog.text


def test_folders_taken_away_are_made_again(tmp_path):
    connection, queue = folder_queue(tmp_path, "away")
    with connection:
        queue.put({"n": 1})
        shutil.rmtree(tmp_path / "messages-taken")
        assert queue.get(timeout=5).payload == {"n": 1}
        shutil.rmtree(tmp_path / "messages")
        queue.put({"n": 2})
        assert queue.get(timeout=5).payload == {"n": 2}


def test_a_folder_that_takes_no_file_is_a_broker_that_is_away(tmp_path):
    from kombu import Connection
    from kombu.exceptions import OperationalError

    (tmp_path / "messages").mkdir()
    (tmp_path / "messages").chmod(0o500)
    if os.access(tmp_path / "messages", os.W_OK):  # root writes anyway: a file stands for it
        (tmp_path / "messages").rmdir()
        (tmp_path / "messages").write_text("a file where the folder should be")
    connection = Connection(
        "filesystem://",
        transport=folder_broker.TRANSPORT,
        transport_options={
            "data_folder_in": str(tmp_path / "messages"),
            "data_folder_out": str(tmp_path / "messages"),
            "control_folder": str(tmp_path / "control"),
        },
    )
    with pytest.raises((OperationalError, OSError)):
        connection.ensure_connection(max_retries=1)
