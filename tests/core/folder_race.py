"""One side of the folder broker's race (tests/core/test_folder_broker.py), as a process of its
own: `put N` sends N large messages, `get N` takes them as fast as it can and prints how many
came whole and how many could not be read."""

import json
import sys
import time

from kombu import Connection

transport, folder, role, count = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
options = {"data_folder_in": folder, "data_folder_out": folder, "control_folder": f"{folder}-c"}
with Connection("filesystem://", transport=transport, transport_options=options) as connection:
    queue = connection.SimpleQueue("race", serializer="json")
    if role == "put":
        body = "x" * (2 << 20)  # a write long enough for a reader to come in its middle
        for number in range(count):
            queue.put({"number": number, "body": body})
    else:
        whole, broken, deadline = [], 0, time.monotonic() + 60
        while len(whole) + broken < count and time.monotonic() < deadline:
            try:
                message = queue.get(block=False)
            except queue.Empty:
                continue
            except ValueError:  # JSONDecodeError: the message was read before it was written
                broken += 1
                continue
            whole.append(message.payload["number"])
            message.ack()
        print(json.dumps({"whole": sorted(whole), "broken": broken}))
