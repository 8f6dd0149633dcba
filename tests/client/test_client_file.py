"""The client file that `hpcgrade login` (and `%hpcgrade login`) writes holds a token: it ends
readable by its owner alone whatever stood at its path before, and a symlink there is replaced,
never followed (it could lead the token into a file others read)."""

import shutil
import stat

import pytest

from hpcgrade.client_file import read as read_client_file
from hpcgrade.client_file import save as save_client_file
from hpcgrade.service import NOT_LOGGED_IN, Service, ServiceError

SERVER, TOKEN = "http://grader.example", "secret"
KEPT = {"server": SERVER, "tokens": {SERVER: TOKEN}}


@pytest.fixture
def client_file(tmp_path, monkeypatch):
    path = tmp_path / "hpcgrade" / "client.toml"
    monkeypatch.setenv("HPCGRADE_CLIENT_CONFIG", str(path))
    return path


def mode(path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


def kept_alone(path) -> bool:
    """A regular file of the owner's alone, holding KEPT, and nothing else left beside it."""
    return (
        stat.S_ISREG(path.lstat().st_mode)
        and mode(path) == 0o600
        and read_client_file() == KEPT
        and [p.name for p in path.parent.iterdir()] == [path.name]
    )


def test_a_new_client_file_is_its_owners_alone(client_file):
    save_client_file(SERVER, TOKEN)
    assert kept_alone(client_file)


def test_a_client_file_that_others_could_read_ends_its_owners_alone(client_file):
    client_file.parent.mkdir()
    client_file.write_text('server = "http://old.example"\ntoken = "old"\n')
    client_file.chmod(0o644)
    save_client_file(SERVER, TOKEN)
    assert stat.S_IMODE(client_file.stat().st_mode) == 0o600
    assert read_client_file() == {
        "server": SERVER,
        "tokens": {"http://old.example": "old", SERVER: TOKEN},
    }


def test_a_symlink_at_the_client_files_path_is_replaced_not_followed(client_file, tmp_path):
    elsewhere = tmp_path / "shared.txt"
    elsewhere.write_text("someone else's\n")
    elsewhere.chmod(0o644)
    client_file.parent.mkdir()
    client_file.symlink_to(elsewhere)
    save_client_file(SERVER, TOKEN)
    assert kept_alone(client_file)
    assert elsewhere.read_text() == "someone else's\n" and mode(elsewhere) == 0o644


def test_a_saved_token_goes_only_to_the_server_that_issued_it(client_file, monkeypatch):
    """A token saved for one server was sent to whatever server HPCGRADE_SERVER named."""
    save_client_file("http://a.example/", "token-of-a")
    save_client_file("http://b.example", "token-of-b")
    monkeypatch.delenv("HPCGRADE_TOKEN", raising=False)
    monkeypatch.setattr(shutil, "which", lambda name: None)  # no munge to fall back on
    assert Service().server == "http://b.example" and Service().token == "token-of-b"
    monkeypatch.setenv("HPCGRADE_SERVER", "http://a.example")
    assert Service().token == "token-of-a"
    monkeypatch.setenv("HPCGRADE_SERVER", "http://elsewhere.example")
    with pytest.raises(ServiceError) as refused:
        Service()
    assert refused.value.kind == NOT_LOGGED_IN


def test_a_client_file_of_one_token_keeps_it_for_its_server_alone(client_file, monkeypatch):
    client_file.parent.mkdir()
    client_file.write_text('server = "http://old.example/"\ntoken = "old"\n')
    monkeypatch.delenv("HPCGRADE_TOKEN", raising=False)
    monkeypatch.setenv("HPCGRADE_SERVER", "http://other.example")
    monkeypatch.setattr(shutil, "which", lambda name: None)
    assert read_client_file()["tokens"] == {"http://old.example": "old"}
    with pytest.raises(ServiceError):
        Service()
