"""The service's JSON API from a student's side, with the standard library alone: the one client
of the API, used by the Jupyter extension (magic.py) and by `hpcgrade login`, `submit` and
`check` (terminal.py, the terminal's words and exit statuses over it).

Where the server is and the token come from the environment (HPCGRADE_SERVER, HPCGRADE_TOKEN) or
the client file that logging in writes (client_file.py). With no token, on a node of a cluster
whose service takes MUNGE credentials, each request carries a new one that `munge` makes, bound
to it (its method, path and body's hash: server/core/munge.py): no log-in at all. The token goes to that server alone: an
address an answer names is followed by its path only, and a redirect to another host or from
https to http is refused. Here: Service (requests, their retries, waiting for a grade), log_in,
the advice a student is given in the words of where the client runs (Advice), and the user's
courses: an exercise is named EXERCISE, or COURSE/EXERCISE where it is in several of them.
"""

from __future__ import annotations

import getpass
import hashlib
import http.client
import json
import os
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from hpcgrade import client_file

REQUEST_SECONDS = 30
POLL_SECONDS = 1.0
WAITING = ("queued", "running")
# a request is sent again (with the same idempotency key, for a submission) after a server
# error, a lost connection or a time-out, RETRIES times at most, CONNECT_RETRIES of them for a
# connection never made; the waits double from BACKOFF_SECONDS unless the server says how long
RETRIES, CONNECT_RETRIES, BACKOFF_SECONDS = 5, 2, 0.5
RETRIED_STATUSES = (500, 502, 503, 504)
RETRIED_WITH_RETRY_AFTER = (413, 429, 503)
# a credential is used at once; a request kept waiting in a loaded service's backlog must not
# outlive it (the service refuses those older than its MUNGE_MAX_AGE_SECONDS, 120 by default)
MUNGE_TTL_SECONDS = 120

NOT_LOGGED_IN, REFUSED, UNREACHABLE = "not logged in", "refused", "unreachable"
AMBIGUOUS = 409  # the exercise is in several of the user's courses: the server names them
ROLE_NAMES = {"student": "student", "ta": "teaching assistant", "instructor": "instructor"}


class ServiceError(Exception):
    """The request could not be made, or was refused: `kind` says which (one of the above)."""

    def __init__(self, message: str, kind: str):
        super().__init__(message)
        self.kind = kind


@dataclass(frozen=True)
class Advice:
    """What a student is told, in the words of where the client runs: when it is not logged in,
    and when the server refuses the token (`{reason}`, where used: the server's words) that the
    client file holds or that HPCGRADE_TOKEN holds (logging in again does not help while
    HPCGRADE_TOKEN, which comes first, holds the old one), and how to name a course when the
    exercise is in several of theirs."""

    not_logged_in: str
    saved_token_refused: str
    environment_token_refused: str
    name_a_course: str


IN_JUPYTER = Advice(
    not_logged_in="not logged in: `%hpcgrade login --server URL` in Jupyter, or `hpcgrade login "
    "--server URL` in a terminal, once (or set HPCGRADE_SERVER and HPCGRADE_TOKEN)",
    # the server's reason, written for any client ("send 'Authorization: Bearer <token>'",
    # "run hpcgrade login again"), is left out: it names neither `%hpcgrade login` nor Jupyter
    saved_token_refused="your saved token is no longer valid (revoked, after a change of "
    "password for instance, or expired): run `%hpcgrade login` again (in a "
    "terminal: `hpcgrade login`)",
    environment_token_refused="the token in HPCGRADE_TOKEN is not valid (revoked, expired or "
    "mistyped): set a new one, or unset it and run `%hpcgrade login`",
    name_a_course="name one: COURSE/EXERCISE, --course COURSE, or `%hpcgrade course COURSE` once "
    "for this notebook (`%hpcgrade my-courses` lists your courses)",
)


def course_and_exercise(
    reference: str, course: str | None = None, usual: str | None = None
) -> tuple[str | None, str]:
    """(course or None, exercise) of EXERCISE or COURSE/EXERCISE, with `course` the one a
    --course option names, and `usual` the one the user set for all their commands
    (HPCGRADE_CLIENT_COURSE, or a notebook's `%hpcgrade course`), which either of the others overrides.
    Raises ValueError when the first two name different courses."""
    named, slash, exercise = reference.rpartition("/")
    if not slash:
        return course or usual or None, reference
    if course and course != named:
        raise ValueError(f"{reference} names another course than --course {course}: name one")
    return named, exercise


def listed_courses(courses: list[dict], lang: str = "en") -> str:
    """The user's courses, one a line: slug, role, title and edition, the archived said so."""
    lines = [
        f"{course['slug']:<24} {ROLE_NAMES.get(course['role'], course['role']):<19} "
        f"{course['title'].get(lang) or course['title']['en']}"
        f"{' (' + course['edition'] + ')' if course.get('edition') else ''}"
        f"{' [archived]' if course.get('archived') else ''}"
        for course in courses
    ]
    return "\n".join(lines) or "you are in no course yet: ask its instructors to enrol you"


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
    # from the root, always: "6/steal" after "http://host:897" would make port 8976
    path = "/" + parts.path.lstrip("/")
    return server + path + (f"?{parts.query}" if parts.query else "")


class _SameHost(urllib.request.HTTPRedirectHandler):
    """A redirect to another host, or from https to http, would carry the token there or in
    the clear: refused."""

    def redirect_request(self, request, fp, code, message, headers, new_url):
        old, new = urllib.parse.urlsplit(request.full_url), urllib.parse.urlsplit(new_url)
        if (new.scheme, new.netloc) != (old.scheme, old.netloc):
            raise ServiceError(
                f"{request.full_url} redirects to another place ({new_url}): "
                "is the server's URL right?",
                UNREACHABLE,
            )
        return super().redirect_request(request, fp, code, message, headers, new_url)


_OPENER = urllib.request.build_opener(_SameHost)


def log_in(server: str, username: str, password: str) -> dict:
    """A new token for this user (the API's answer: token, username, expires_at), kept in the
    client file with the server's URL. Sent once, never again."""
    service = Service(server, token="")
    answer = service.request(
        "POST",
        "/api/v1/tokens",
        {},
        json.dumps({"username": username, "password": password, "label": token_label()}).encode(),
        {"Content-Type": "application/json"},
        retries=0,
    )
    if not isinstance(answer.get("token"), str) or not answer["token"]:
        raise ServiceError(
            f"{service.server} gave no token: is it an hpcgrade server?", UNREACHABLE
        )
    client_file.save(service.server, answer["token"])
    return answer


class Service:
    def __init__(
        self, server: str | None = None, token: str | None = None, advice: Advice = IN_JUPYTER
    ):
        """`token=""`: none (logging in); otherwise the given one, else HPCGRADE_TOKEN, else the
        client file's. Raises ValueError for a client file that cannot be read."""
        config = client_file.read() if not (server and token is not None) else {"tokens": {}}
        self.server = server or os.environ.get("HPCGRADE_SERVER") or config.get("server") or ""
        self.server = self.server.rstrip("/")
        # a saved token goes to the server that issued it, never to another one named later
        self.token = (
            token
            if token is not None
            else (os.environ.get("HPCGRADE_TOKEN") or config["tokens"].get(self.server))
        )
        # no token: the cluster vouches for its user, where munge is installed
        self.munge = shutil.which("munge") if self.token is None else None
        from_environment = token is None and os.environ.get("HPCGRADE_TOKEN")
        self.token_refused = (
            advice.environment_token_refused if from_environment else advice.saved_token_refused
        )
        self.not_logged_in = advice.not_logged_in
        self.name_a_course = advice.name_a_course
        if not self.server or (self.token is None and self.munge is None):
            raise ServiceError(advice.not_logged_in, NOT_LOGGED_IN)

    def page(self, created: dict) -> str:
        """The submission's web page in its course (not its address in the API), from the
        answer to the submission."""
        return on_server(self.server, created["page"])

    def get(self, path: str, **params: str) -> dict:
        return self.request("GET", path, params)

    def courses(self) -> list[dict]:
        """The user's courses: each slug, title (en, es), edition, role, archived."""
        return self.get("/api/v1/courses")["courses"]

    def submit(
        self, exercise: str, filename: str, data: bytes, lang: str = "en", course: str | None = None
    ) -> dict:
        """The API's answer: id, url (the status's address), page, course, status. `course`:
        the exercise's, where the user has several courses with it (None: the server finds
        it). One idempotency key for every try: the server stores the submission once."""
        boundary = uuid.uuid4().hex
        # the name as UTF-8 (as browsers send it: práctica.ipynb stays so), quotes escaped
        quoted = (
            filename.replace("\\", "\\\\").replace('"', '\\"').replace("\r", "").replace("\n", "")
        )
        fields = {"exercise": exercise, **({"course": course} if course else {})}
        body = (
            "".join(
                f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n{value}\r\n'
                for name, value in fields.items()
            ).encode()
            + (
                f'--{boundary}\r\nContent-Disposition: form-data; name="file"; '
                f'filename="{quoted}"\r\nContent-Type: application/octet-stream\r\n\r\n'
            ).encode()
            + data
            + f"\r\n--{boundary}--\r\n".encode()
        )
        return self.request(
            "POST",
            "/api/v1/submissions",
            {"lang": lang},
            body,
            {
                "Content-Type": f"multipart/form-data; boundary={boundary}",
                "Idempotency-Key": str(uuid.uuid4()),
            },
        )

    def wait_for_grade(
        self, created: dict, lang: str, timeout: float, progress: Callable[[dict, float], None]
    ) -> dict | None:
        """The submission's status in `lang` once it is neither queued nor running; None when
        `timeout` seconds pass first. `created` is the answer to the submission, read again
        even when final (it holds no result); `progress` is told each status still waiting,
        with the seconds waited, the last one seen included."""
        status, started = created, time.monotonic()
        while status["status"] in WAITING:
            waited = time.monotonic() - started
            progress(status, waited)
            if waited > timeout:
                return None
            time.sleep(POLL_SECONDS)
            status = self.get(created["url"], lang=lang)
        return self.get(created["url"], lang=lang) if status is created else status

    def request(
        self,
        method: str,
        path: str,
        params: dict,
        body: bytes | None = None,
        headers: dict | None = None,
        retries: int | None = None,
    ) -> dict:
        """The answer, a JSON object; sent again as RETRIES says unless `retries` says less."""
        url = on_server(self.server, path)
        if params:
            url += "?" + urllib.parse.urlencode(params)
        tries = _Tries(RETRIES if retries is None else retries)
        while True:  # a new request each try: a MUNGE credential serves once
            request = urllib.request.Request(
                url,
                body,
                method=method,
                headers={
                    "Accept": "application/json",
                    **(headers or {}),
                    **self._authorization(method, url, body),
                },
            )
            try:
                with _OPENER.open(request, timeout=REQUEST_SECONDS) as reply:
                    answer = _json_object(reply.read())
                break
            except urllib.error.HTTPError as exc:
                if not tries.again_after(exc):
                    raise self._refusal(exc, url) from None
            except (urllib.error.URLError, OSError, http.client.HTTPException) as exc:
                if not tries.again_after(exc):
                    raise _unreachable(exc, url) from None
        if answer is None:
            raise ServiceError(
                f"{url} did not answer as an hpcgrade server does (no JSON "
                "object): is the server's URL right?",
                UNREACHABLE,
            )
        return answer

    def _authorization(self, method: str, url: str, body: bytes | None) -> dict[str, str]:
        if self.token:
            return {"Authorization": f"Bearer {self.token}"}
        if self.munge:
            parts = urllib.parse.urlsplit(url)
            path = parts.path + (f"?{parts.query}" if parts.query else "")
            return {"Authorization": f"MUNGE {self._munge_credential(method, path, body or b'')}"}
        return {}

    def _munge_credential(self, method: str, path: str, body: bytes) -> str:
        """A credential of this user, for this request alone (its binding as the service
        computes it)."""
        binding = f"hpcgrade-api-v1 {method} {path} {hashlib.sha256(body).hexdigest()}"
        try:
            made = subprocess.run(
                [self.munge, "-s", binding, "-t", str(MUNGE_TTL_SECONDS)],
                capture_output=True,
                text=True,
                timeout=REQUEST_SECONDS,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            made = subprocess.CompletedProcess([], 1, "", str(exc))
        if made.returncode != 0 or not made.stdout.startswith("MUNGE:"):
            raise ServiceError(
                f"munge cannot vouch for you here ({made.stderr.strip()}): log in "
                "with `hpcgrade login --server URL` instead",
                NOT_LOGGED_IN,
            )
        return made.stdout.strip()

    def _refusal(self, exc: urllib.error.HTTPError, url: str) -> ServiceError:
        with exc:  # the connection closed, whoever keeps the exception
            reason = (_json_object(exc.read()) or {}).get("error") or f"HTTP {exc.code} from {url}"
        if exc.code == 401:
            schemes = " ".join(exc.headers.get_all("WWW-Authenticate") or []).lower()
            if self.munge and "munge" not in schemes:
                return ServiceError(self.not_logged_in, NOT_LOGGED_IN)  # it takes tokens alone
            return ServiceError(
                self.token_refused.format(reason=reason) if self.token else reason, NOT_LOGGED_IN
            )
        if exc.code == AMBIGUOUS:  # the server's words name the courses; these say how to pick
            return ServiceError(f"{reason}\n{self.name_a_course}", REFUSED)
        return ServiceError(reason, UNREACHABLE if exc.code >= 500 else REFUSED)


class _Tries:
    """Whether a request that failed is sent again, after waiting how long."""

    def __init__(self, retries: int):
        self.left, self.connections_left, self.failed = retries, CONNECT_RETRIES, 0

    def again_after(self, failure: Exception) -> bool:
        """Waits before the next try and says True, or says False: no more tries."""
        wait = None
        if isinstance(failure, urllib.error.HTTPError):
            told = _retry_after_seconds(failure.headers.get("Retry-After"))
            if told is not None and failure.code in RETRIED_WITH_RETRY_AFTER:
                wait = told
            elif failure.code not in RETRIED_STATUSES:
                return False
        elif isinstance(failure, urllib.error.URLError):  # before an answer began: connecting
            if self.connections_left == 0:
                return False
            self.connections_left -= 1
        if self.left == 0:
            return False
        self.left -= 1
        self.failed += 1
        if isinstance(failure, urllib.error.HTTPError):
            failure.close()  # its body is not read: the next try's answer is
        if wait is None:
            wait = 0 if self.failed == 1 else BACKOFF_SECONDS * 2 ** (self.failed - 1)
        time.sleep(wait)
        return True


def _retry_after_seconds(retry_after: str | None) -> float | None:
    """Retry-After in seconds, as this service says it."""
    return float(retry_after) if retry_after and retry_after.strip().isdigit() else None


def _unreachable(exc: Exception, url: str) -> ServiceError:
    reason = getattr(exc, "reason", exc)
    if isinstance(reason, TimeoutError):
        return ServiceError(f"{url} did not answer within {REQUEST_SECONDS} s", UNREACHABLE)
    return ServiceError(
        f"cannot connect to {url} ({reason}): is the server's URL right?", UNREACHABLE
    )


def _json_object(body: bytes) -> dict | None:
    try:
        answer = json.loads(body)
    except ValueError:
        return None
    return answer if isinstance(answer, dict) else None
