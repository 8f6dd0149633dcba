"""The service's JSON API from a student's side, with the standard library alone.

Where the server is and the token come from the environment (HPCGRADE_SERVER, HPCGRADE_TOKEN) or
the client file that `hpcgrade login` writes (HPCGRADE_CLIENT_CONFIG, by default
~/.config/hpcgrade/client.toml).
"""
from __future__ import annotations

import json
import os
import tomllib
import urllib.error
import urllib.parse
import urllib.request
import uuid
from pathlib import Path

REQUEST_SECONDS = 30


NOT_LOGGED_IN, REFUSED, UNREACHABLE = "not logged in", "refused", "unreachable"


class ServiceError(Exception):
    """The request could not be made, or was refused: `kind` says which (one of the above)."""

    def __init__(self, message: str, kind: str):
        super().__init__(message)
        self.kind = kind


def client_config_path() -> Path:
    if os.environ.get("HPCGRADE_CLIENT_CONFIG"):
        return Path(os.environ["HPCGRADE_CLIENT_CONFIG"])
    base = Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config")
    return base / "hpcgrade" / "client.toml"


def read_client_config() -> dict:
    """The client file; empty when there is none. Raises ValueError for one that cannot be read."""
    path = client_config_path()
    try:
        with open(path, "rb") as f:
            return tomllib.load(f)
    except FileNotFoundError:
        return {}
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ValueError(f"{path}: {exc} — run `hpcgrade login` again") from None


class Service:
    def __init__(self, server: str | None = None, token: str | None = None):
        config = read_client_config() if not (server and token) else {}
        self.server = (server or os.environ.get("HPCGRADE_SERVER") or config.get("server") or "")
        self.server = self.server.rstrip("/")
        self.token = token or os.environ.get("HPCGRADE_TOKEN") or config.get("token")
        if not self.server or not self.token:
            raise ServiceError("not logged in: run `hpcgrade login --server URL` in a terminal "
                               "once (or set HPCGRADE_SERVER and HPCGRADE_TOKEN)", NOT_LOGGED_IN)

    def page(self, submission_id: int) -> str:
        return f"{self.server}/submissions/{submission_id}"

    def get(self, path: str, **params: str) -> dict:
        return self._request("GET", path, params)

    def submit(self, exercise: str, filename: str, data: bytes, lang: str = "en") -> dict:
        boundary = uuid.uuid4().hex
        body = (f'--{boundary}\r\nContent-Disposition: form-data; name="exercise"\r\n\r\n'
                f"{exercise}\r\n--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; "
                f"filename={json.dumps(filename)}\r\nContent-Type: application/octet-stream\r\n\r\n"
                ).encode() + data + f"\r\n--{boundary}--\r\n".encode()
        return self._request("POST", "/api/v1/submissions", {"lang": lang}, body, {
            "Content-Type": f"multipart/form-data; boundary={boundary}",
            "Idempotency-Key": str(uuid.uuid4())})

    def _request(self, method: str, path: str, params: dict, body: bytes | None = None,
                 headers: dict | None = None) -> dict:
        url = path if path.startswith("http") else self.server + path
        if params:
            url += "?" + urllib.parse.urlencode(params)
        request = urllib.request.Request(url, body, method=method, headers={
            "Authorization": f"Bearer {self.token}", "Accept": "application/json",
            **(headers or {})})
        try:
            with urllib.request.urlopen(request, timeout=REQUEST_SECONDS) as reply:
                return json.load(reply)
        except urllib.error.HTTPError as exc:
            try:
                message = json.load(exc).get("error")
            except ValueError:
                message = None
            kind = NOT_LOGGED_IN if exc.code == 401 else UNREACHABLE if exc.code >= 500 else REFUSED
            raise ServiceError(message or f"HTTP {exc.code} from {url}", kind) from None
        except (urllib.error.URLError, OSError) as exc:
            raise ServiceError(f"cannot reach {self.server}: {getattr(exc, 'reason', exc)}",
                               UNREACHABLE) from None
