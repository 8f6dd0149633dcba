"""Submitting from the cluster with MUNGE (server/core/munge.py): the munged of the local Slurm
(scripts/slurm) vouches for the cluster's users, `hpcgrade` (uid 999) and `nobody`; a
credential serves one request, the one it was made for, once."""

import io
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
import sqlalchemy as sa
from helpers import REFERENCE_Q, change_settings, served_over_http
from werkzeug.test import EnvironBuilder

from hpcgrade.service import NOT_LOGGED_IN, Service, ServiceError
from server.core.models import MungeCredential, Submission, User
from server.core.munge import binding
from server.core.users import add_user

pytestmark = [
    pytest.mark.slurm,
    pytest.mark.skipif(
        not shutil.which("munge") and not os.environ.get("CI"), reason="no munge (scripts/slurm)"
    ),
]
PATH = "/api/v1/submissions"
CLUSTER_USER = "hpcgrade"  # the grading account scripts/slurm makes, a cluster user here


def credential(payload: str, user: str = CLUSTER_USER, ttl: int = 60) -> str:
    """A credential of the cluster user `user`, made as they would make it."""
    return subprocess.run(
        ["runuser", "-u", user, "--", "munge", "-s", payload, "-t", str(ttl)],
        capture_output=True,
        text=True,
        check=True,
        timeout=10,
    ).stdout.strip()


def form(code: str = REFERENCE_Q) -> dict:
    return {"exercise": "autograd-q", "file": (io.BytesIO(code.encode()), "work.py")}


def encoded(data: dict) -> tuple[bytes, str]:
    """The body and content type of this form as a client sends it, to bind a credential."""
    request = EnvironBuilder(method="POST", data=data).get_request()
    return request.get_data(), request.content_type


def submit(
    client,
    header: str | None,
    code: str = REFERENCE_Q,
    path: str = PATH,
    user: str = CLUSTER_USER,
    **made,
):
    """A submission of `code` with a MUNGE credential bound to it (or `header` as it is)."""
    body, content_type = encoded(form(code))
    if header is None:
        header = "MUNGE " + credential(binding("POST", path, body), user, **made)
    return client.post(
        PATH, data=body, content_type=content_type, headers={"Authorization": header}
    )


@pytest.fixture
def cluster(course):
    """The portal taking MUNGE credentials; `hpcgrade` is a directory account, `nobody` a
    local one."""
    change_settings(course, MUNGE_LOGIN=True, MUNGE_MIN_UID=900)
    with course.app_context():
        session = course.extensions["hpcgrade.db"].sessions()
        add_user(
            session, CLUSTER_USER, "Grading account", "g@uni.es", "student", None
        ).auth_source = "ldap"
        add_user(session, "nobody", "Nobody", "n@uni.es", "student", None)
        session.commit()
    return course


def submitter(app, reply) -> str:
    with app.app_context():
        session = app.extensions["hpcgrade.db"].sessions()
        return session.get(Submission, reply.json["id"]).user.username


def test_a_credential_submits_as_the_cluster_user_and_serves_once(cluster):
    client = cluster.test_client()
    body, content_type = encoded(form())
    header = "MUNGE " + credential(binding("POST", PATH, body))
    created = client.post(
        PATH, data=body, content_type=content_type, headers={"Authorization": header}
    )
    assert created.status_code == 202, created.json
    assert submitter(cluster, created) == CLUSTER_USER
    replayed = client.post(
        PATH, data=body, content_type=content_type, headers={"Authorization": header}
    )
    assert replayed.status_code == 401
    assert "replayed credential" in replayed.json["error"]


@pytest.fixture
def munged_folder():
    """A folder the munge account may use (pytest's are root's alone)."""
    with tempfile.TemporaryDirectory(prefix="hpcgrade-munged-") as name:
        folder = Path(name)
        folder.chmod(0o755)  # munged wants its socket's folder searchable by all
        shutil.chown(folder, "munge", "munge")
        yield folder


def test_a_replay_to_another_portal_whose_munged_never_saw_it_is_refused(cluster, munged_folder):
    """Two portals, each decoding with its own munged (same key): munged's replay cache is not
    shared, the database's record of spent credentials is."""
    folder = munged_folder
    socket = folder / "socket"
    subprocess.run(
        [
            "runuser",
            "-u",
            "munge",
            "--",
            "/usr/sbin/munged",
            "-S",
            str(socket),
            "--pid-file",
            str(folder / "pid"),
            "--log-file",
            str(folder / "log"),
            "--seed-file",
            str(folder / "seed"),
        ],
        check=True,
        timeout=10,
    )
    try:
        client = cluster.test_client()
        body, content_type = encoded(form())
        header = "MUNGE " + credential(binding("POST", PATH, body))
        first = client.post(
            PATH, data=body, content_type=content_type, headers={"Authorization": header}
        )
        assert first.status_code == 202
        change_settings(cluster, MUNGE_SOCKET=str(socket))  # the second portal's munged
        again = client.post(
            PATH, data=body, content_type=content_type, headers={"Authorization": header}
        )
        assert again.status_code == 401 and "replayed credential" in again.json["error"]
    finally:
        pid = (folder / "pid").read_text().strip()
        subprocess.run(["kill", pid], timeout=10)
        for _ in range(100):  # gone, with its socket, before its folder is removed
            if not Path(f"/proc/{pid}").exists():
                break
            time.sleep(0.05)


def test_a_credential_bound_to_another_file_is_refused(cluster):
    client = cluster.test_client()
    other_body, _type = encoded(form(REFERENCE_Q + "\n# another file\n"))
    stolen = "MUNGE " + credential(binding("POST", PATH, other_body))
    refused = submit(client, stolen)
    assert refused.status_code == 401
    assert "made for another request" in refused.json["error"]
    with cluster.app_context():
        assert (
            cluster.extensions["hpcgrade.db"]
            .sessions()
            .scalar(sa.select(sa.func.count(Submission.id)))
            == 0
        )


def test_another_users_credential_for_this_file_is_that_user_or_nobody(cluster):
    """`nobody` made a credential for exactly this request: it proves nobody sent it, and
    nobody's account is local, which MUNGE does not vouch for unless told to."""
    client = cluster.test_client()
    refused = submit(client, None, user="nobody")
    assert refused.status_code == 401
    assert "the cluster user nobody has no account here" in refused.json["error"]
    change_settings(cluster, MUNGE_ACCOUNTS=["ldap", "local"])
    created = submit(client, None, user="nobody")
    assert created.status_code == 202 and submitter(cluster, created) == "nobody"


def test_an_expired_or_old_credential_is_refused(cluster):
    client = cluster.test_client()
    body, content_type = encoded(form())
    header = "MUNGE " + credential(binding("POST", PATH, body), ttl=1)
    time.sleep(2.1)
    expired = client.post(
        PATH, data=body, content_type=content_type, headers={"Authorization": header}
    )
    assert expired.status_code == 401 and "expired credential" in expired.json["error"]
    change_settings(cluster, MUNGE_MAX_AGE_SECONDS=1)
    header = "MUNGE " + credential(binding("POST", PATH, body), ttl=60)
    time.sleep(2.1)
    old = client.post(PATH, data=body, content_type=content_type, headers={"Authorization": header})
    assert old.status_code == 401 and "more than 1 s from now" in old.json["error"]


def test_system_accounts_garbage_and_a_service_without_munge_are_refused(cluster):
    client = cluster.test_client()
    root = submit(client, None, user="root")
    assert root.status_code == 401 and "uid 0 may not submit" in root.json["error"]
    garbage = submit(client, "MUNGE MUNGE:AAAA:")
    assert garbage.status_code == 401
    assert "not a MUNGE credential of this cluster" in garbage.json["error"]
    assert submit(client, "MUNGE x").json["error"].endswith("not a MUNGE credential")
    body, content_type = encoded(form())
    unnamed = subprocess.run(  # root may make one for any uid: one this host has no name for
        ["munge", "-U", "4242", "-s", binding("POST", PATH, body)],
        capture_output=True,
        text=True,
        check=True,
        timeout=10,
    ).stdout.strip()
    refused = client.post(
        PATH, data=body, content_type=content_type, headers={"Authorization": f"MUNGE {unnamed}"}
    )
    assert refused.status_code == 401 and "cannot name uid 4242" in refused.json["error"]
    change_settings(cluster, MUNGE_LOGIN=False)
    off = submit(client, None)
    assert off.status_code == 401 and off.headers.getlist("WWW-Authenticate") == ["Bearer"]
    assert "takes no MUNGE credentials" in off.json["error"]


def test_munged_away_is_the_services_trouble_not_a_refusal(cluster, tmp_path):
    change_settings(cluster, MUNGE_SOCKET=str(tmp_path / "no-munged"))
    away = submit(cluster.test_client(), None)
    assert away.status_code == 503
    assert "cannot check MUNGE credentials just now" in away.json["error"]


@pytest.fixture
def served(cluster, tmp_path, monkeypatch):
    """The portal over HTTP, and a `munge` on PATH that makes the cluster user's credentials
    (the student on a login node); no token, no client file."""
    monkeypatch.setenv("HPCGRADE_CLIENT_CONFIG", str(tmp_path / "no-client.toml"))
    monkeypatch.delenv("HPCGRADE_TOKEN", raising=False)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "munge").write_text(
        f'#!/bin/sh\nexec runuser -u {CLUSTER_USER} -- {shutil.which("munge")} "$@"\n'
    )
    (bin_dir / "munge").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    with served_over_http(cluster) as url:
        yield url


def test_the_client_on_a_cluster_node_needs_no_log_in(served, cluster):
    """Every request the client makes carries its own credential: the submission, its status
    read twice, the exercise's public files."""
    service = Service(served)
    created = service.submit("autograd-q", "work.py", REFERENCE_Q.encode())
    assert service.get(created["url"])["status"] == "queued"
    assert service.get(created["url"])["status"] == "queued"
    files = service.get("/api/v1/exercises/autograd-q/files")
    assert "starter.py" in files["files"]
    with cluster.app_context():
        session = cluster.extensions["hpcgrade.db"].sessions()
        assert session.get(Submission, created["id"]).user.username == CLUSTER_USER
        assert session.scalar(sa.select(sa.func.count()).select_from(MungeCredential)) == 4
    change_settings(cluster, MUNGE_LOGIN=False)  # a service that takes tokens alone
    with pytest.raises(ServiceError) as refused:
        Service(served).courses()
    assert refused.value.kind == NOT_LOGGED_IN
    assert str(refused.value).startswith("not logged in: ")


def test_no_account_of_that_name_is_refused(cluster):
    with cluster.app_context():
        session = cluster.extensions["hpcgrade.db"].sessions()
        session.execute(sa.delete(User).where(User.username == CLUSTER_USER))
        session.commit()
    refused = submit(cluster.test_client(), None)
    assert refused.status_code == 401
    assert f"the cluster user {CLUSTER_USER} has no account here" in refused.json["error"]
