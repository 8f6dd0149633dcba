"""kombu's filesystem transport (the demo's broker: a folder), with its races closed.

kombu 5.7 creates a message's file and only then writes into it, and its consumers take any
file whose name ends in the queue's name: a consumer that lists the folder between the two
reads an empty or half-written message, and the worker stops ("Unrecoverable error:
JSONDecodeError"), and the message is lost. Here each message is written whole into a temporary
file of the same folder, whose name no consumer takes, and renamed into place, which is atomic:
a reader sees the whole message or none.

A consumer takes a message by renaming it into a folder of the broker's own (kombu's moves it to
the system's temporary folder, which may be another filesystem, where a move is a copy that two
consumers can both make): of two consumers, one rename succeeds.
"""
from __future__ import annotations

import os
import time
import uuid
from pathlib import Path
from queue import Empty

from kombu.exceptions import ChannelError
from kombu.transport import filesystem
from kombu.utils.json import dumps, loads
from kombu.utils.objects import cached_property

TRANSPORT = f"{__name__}:Transport"  # Celery's broker_transport, for a filesystem:// broker
PARTIAL = ".partial-"  # a file being written: its name never ends in a queue's


def write_whole(path: Path, data: bytes) -> None:
    """`data` at `path`, atomically: written beside it under another name, then renamed."""
    partial = path.parent / f"{PARTIAL}{uuid.uuid4().hex}"
    try:
        with open(partial, "wb") as out:
            out.write(data)
        os.replace(partial, path)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise


class Channel(filesystem.Channel):
    def _put(self, queue, payload, **kwargs):
        # kombu's own name: its time in milliseconds orders the queue
        name = f"{int(round(time.monotonic() * 1000))}_{uuid.uuid4()}.{queue}.msg"
        try:
            write_whole(Path(self.data_folder_out) / name, dumps(payload).encode())
        except OSError as exc:
            raise ChannelError(f"Cannot add file {name!r} to directory") from exc

    def _get(self, queue):
        wanted = f"{queue}.msg"
        taking = self._taking_folder
        for name in sorted(os.listdir(self.data_folder_in)):
            if name.partition(".")[2] != wanted:
                continue
            taken = taking / name
            try:
                os.rename(os.path.join(self.data_folder_in, name), taken)
            except FileNotFoundError:  # another consumer took it first
                continue
            try:
                payload = taken.read_bytes()
            except OSError as exc:
                raise ChannelError(f"Cannot read file {str(taken)!r} from queue.") from exc
            taken.unlink()
            return loads(payload)
        raise Empty()

    @cached_property
    def _taking_folder(self) -> Path:
        """Where a consumer moves a message to read it: beside the messages, so the move is a
        rename."""
        messages = Path(self.data_folder_in)
        folder = messages.parent / f"{messages.name}-taken"
        folder.mkdir(exist_ok=True)
        return folder


class Transport(filesystem.Transport):
    Channel = Channel
