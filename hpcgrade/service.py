"""The service's JSON API from a student's side, with the standard library alone.

Where the server is and the token come from the environment (HPCGRADE_SERVER, HPCGRADE_TOKEN) or
the client file that `hpcgrade login` writes (HPCGRADE_CLIENT_CONFIG, by default
~/.config/hpcgrade/client.toml).
"""
from __future__ import annotations

import getpass
import json
import os
import socket
import tempfile
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


def save_client_config(server: str, token: str) -> Path:
    """The client file, readable by its owner alone: it holds the token. Written as a new file
    beside the old one and moved over it: an old file that others could read keeps its mode
    when opened, and a symlink at its path would be followed, taking the token where it leads."""
    path = client_config_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor, written = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")  # 0600
    try:
        with os.fdopen(descriptor, "w") as f:
            f.write(f"server = {json.dumps(server)}\ntoken = {json.dumps(token)}\n")
        os.replace(written, path)
    except BaseException:
        os.unlink(written)
        raise
    return path


def token_label() -> str:
    """Who asked for a token, from where: user@host, as the account's token page lists it."""
    try:
        who = getpass.getuser()
    except (KeyError, OSError):
        who = "?"
    return f"{who}@{socket.gethostname()}"[:100]


def on_server(server: str, address: str) -> str:
    """A path, or an address the server gave, on the server the token is for: its path and query
    alone, whatever host the address names (the Host a proxy passed on, or a forged answer)."""
    parts = urllib.parse.urlsplit(address)
    return server + parts.path + (f"?{parts.query}" if parts.query else "")


class _SameHost(urllib.request.HTTPRedirectHandler):
    """A redirect to another host, or from https to http, would carry the token there or in
    the clear: refused."""

    def redirect_request(self, request, fp, code, message, headers, new_url):
        old, new = urllib.parse.urlsplit(request.full_url), urllib.parse.urlsplit(new_url)
        if (new.scheme, new.netloc) != (old.scheme, old.netloc):
            raise ServiceError(f"{request.full_url} redirects to another place ({new_url}): "
                               "is the server's URL right?", UNREACHABLE)
        return super().redirect_request(request, fp, code, message, headers, new_url)


_OPENER = urllib.request.build_opener(_SameHost)


def log_in(server: str, username: str, password: str) -> dict:
    """A new token for this user (the API's answer: token, username, expires_at), kept in the
    client file with the server's URL."""
    service = Service(server, token="")
    answer = service.request("POST", "/api/v1/tokens", {}, json.dumps({
        "username": username, "password": password, "label": token_label()}).encode(),
        {"Content-Type": "application/json"})
    if not isinstance(answer.get("token"), str) or not answer["token"]:
        raise ServiceError(f"{service.server} gave no token: is it an hpcgrade server?",
                           UNREACHABLE)
    save_client_config(service.server, answer["token"])
    return answer


class Service:
    def __init__(self, server: str | None = None, token: str | None = None):
        """`token=""`: none (logging in); otherwise the given one, else HPCGRADE_TOKEN, else the
        client file's."""
        config = read_client_config() if not (server and token is not None) else {}
        self.server = (server or os.environ.get("HPCGRADE_SERVER") or config.get("server") or "")
        self.server = self.server.rstrip("/")
        self.token = token if token is not None else (
            os.environ.get("HPCGRADE_TOKEN") or config.get("token"))
        # what to do when the server no longer takes the token: logging in again does not help
        # while HPCGRADE_TOKEN, which comes first, holds the old one
        self.refused_token_advice = (
            "the token in HPCGRADE_TOKEN is not valid (revoked, expired or mistyped): set a new "
            "one, or unset it and log in again" if token is None and os.environ.get("HPCGRADE_TOKEN")
            else "your saved token is no longer valid (revoked, after a change of password for "
            "instance, or expired): `%hpcgrade login` again in Jupyter, or `hpcgrade login` in a "
            "terminal")
        if not self.server or self.token is None:
            raise ServiceError("not logged in: `%hpcgrade login --server URL` in Jupyter, or "
                               "`hpcgrade login --server URL` in a terminal, once (or set "
                               "HPCGRADE_SERVER and HPCGRADE_TOKEN)", NOT_LOGGED_IN)

    @staticmethod
    def configured_server() -> str | None:
        """The server of the client file, if there is one."""
        return read_client_config().get("server")

    def page(self, submission_id: int) -> str:
        return f"{self.server}/submissions/{submission_id}"

    def get(self, path: str, **params: str) -> dict:
        return self.request("GET", path, params)

    def submit(self, exercise: str, filename: str, data: bytes, lang: str = "en") -> dict:
        boundary = uuid.uuid4().hex
        # the name as UTF-8 (as browsers send it: práctica.ipynb stays so), quotes escaped
        quoted = filename.replace("\\", "\\\\").replace('"', '\\"').replace("\r", "").replace("\n", "")
        body = (f'--{boundary}\r\nContent-Disposition: form-data; name="exercise"\r\n\r\n'
                f"{exercise}\r\n--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; "
                f'filename="{quoted}"\r\nContent-Type: application/octet-stream\r\n\r\n'
                ).encode() + data + f"\r\n--{boundary}--\r\n".encode()
        return self.request("POST", "/api/v1/submissions", {"lang": lang}, body, {
            "Content-Type": f"multipart/form-data; boundary={boundary}",
            "Idempotency-Key": str(uuid.uuid4())})

    def request(self, method: str, path: str, params: dict, body: bytes | None = None,
                 headers: dict | None = None) -> dict:
        url = on_server(self.server, path)
        if params:
            url += "?" + urllib.parse.urlencode(params)
        request = urllib.request.Request(url, body, method=method, headers={
            "Accept": "application/json", **(headers or {}),
            **({"Authorization": f"Bearer {self.token}"} if self.token else {})})
        try:
            with _OPENER.open(request, timeout=REQUEST_SECONDS) as reply:
                answer = _json_object(reply.read())
            if answer is None:
                raise ServiceError(f"{url} did not answer as an hpcgrade server does (no JSON "
                                   "object): is the server's URL right?", UNREACHABLE)
            return answer
        except urllib.error.HTTPError as exc:
            message = (_json_object(exc.read()) or {}).get("error")
            message = message or f"HTTP {exc.code} from {url}"
            if exc.code == 401 and self.token:
                raise ServiceError(f"{message} — {self.refused_token_advice}",
                                   NOT_LOGGED_IN) from None
            raise ServiceError(message, UNREACHABLE if exc.code >= 500 else REFUSED) from None
        except (urllib.error.URLError, OSError) as exc:
            raise ServiceError(f"cannot reach {self.server}: {getattr(exc, 'reason', exc)}",
                               UNREACHABLE) from None


def _json_object(body: bytes) -> dict | None:
    try:
        answer = json.loads(body)
    except ValueError:
        return None
    return answer if isinstance(answer, dict) else None
