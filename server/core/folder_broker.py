"""kombu's filesystem transport (the demo's broker: a folder), with its races closed.

kombu 5.7 creates a message's file and only then writes into it, and its consumers take any
file whose name ends in the queue's name: a consumer that lists the folder between the two
reads an empty or half-written message, and the worker stops ("Unrecoverable error:
JSONDecodeError"), and the message is lost. Here each message is written whole into a temporary
file of the same folder, whose name no consumer takes, and renamed into place, which is atomic:
a reader sees the whole message or none.

A consumer takes a message by renaming it into a folder of the broker's own (kombu's moves it to
the system's temporary folder, which may be another filesystem, where a move is a copy that two
consumers can both make): of two consumers, one rename succeeds. A file in the folder that is
no message (written there by hand, or cut short by a full disk) is set aside, in a folder of
its own beside the messages, and said in the log: kombu's stopped the worker on it.

The folders are made again where they are missing (an operator cleaned them away), and a
connection is established only once the messages' folder takes a file: a full disk, or a
folder that cannot be written, is a broker that is away (/healthz says so).
"""

from __future__ import annotations

import logging
import os
import time
import uuid
from pathlib import Path
from queue import Empty

from kombu.exceptions import ChannelError
from kombu.exceptions import ConnectionError as BrokerAway
from kombu.transport import filesystem
from kombu.utils.json import dumps, loads

log = logging.getLogger(__name__)
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
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._make_folders()

    def _make_folders(self) -> None:
        for folder in (
            self.data_folder_in,
            self.data_folder_out,
            self.control_folder,
            self._beside("taken"),
            self._beside("rejected"),
        ):
            Path(folder).mkdir(parents=True, exist_ok=True)

    def _beside(self, what: str) -> Path:
        """A folder of the broker's own beside the messages: renames into it stay renames."""
        messages = Path(self.data_folder_in)
        return messages.parent / f"{messages.name}-{what}"

    def _put(self, queue, payload, **kwargs):
        # kombu's own name: its time in milliseconds orders the queue
        name = f"{int(round(time.monotonic() * 1000))}_{uuid.uuid4()}.{queue}.msg"
        try:
            try:
                write_whole(Path(self.data_folder_out) / name, dumps(payload).encode())
            except FileNotFoundError:  # its folder was taken away: made again, written again
                self._make_folders()
                write_whole(Path(self.data_folder_out) / name, dumps(payload).encode())
        except OSError as exc:
            raise ChannelError(f"Cannot add file {name!r} to directory") from exc

    def _get(self, queue):
        wanted = f"{queue}.msg"
        try:
            names = sorted(os.listdir(self.data_folder_in))
        except FileNotFoundError:
            self._make_folders()
            raise Empty() from None
        for name in names:
            if name.partition(".")[2] != wanted:
                continue
            taken = self._take(name)
            if taken is None:  # another consumer took it first
                continue
            try:
                payload = taken.read_bytes()
            except OSError as exc:
                raise ChannelError(f"Cannot read file {str(taken)!r} from queue.") from exc
            try:
                message = loads(payload)
            except ValueError as exc:
                rejected = self._beside("rejected") / name
                os.replace(taken, rejected)
                log.error("%s is no message (%s): set aside as %s", name, exc, rejected)
                continue
            taken.unlink()
            return message
        raise Empty()

    def _take(self, name: str) -> Path | None:
        """The message, renamed out of the queue; None if another consumer renamed it first."""
        taken = self._beside("taken") / name
        for _ in range(2):
            try:
                os.rename(os.path.join(self.data_folder_in, name), taken)
                return taken
            except FileNotFoundError:
                if os.path.exists(os.path.join(self.data_folder_in, name)):
                    self._make_folders()  # the folder it goes to was taken away
                    continue
                return None
        return None


class Transport(filesystem.Transport):
    Channel = Channel

    def establish_connection(self):
        connected = super().establish_connection()
        probe = Path(self._avail_channels[-1].data_folder_out) / f"{PARTIAL}{uuid.uuid4().hex}"
        try:
            probe.write_bytes(b"probe")
            probe.unlink()
        except OSError as exc:
            probe.unlink(missing_ok=True)
            raise BrokerAway(f"the broker's folder {probe.parent} takes no file: {exc}") from exc
        return connected
