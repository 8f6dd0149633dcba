"""The client file that `hpcgrade login` (and `%hpcgrade login`) writes holds a token: it ends
readable by its owner alone whatever stood at its path before, and a symlink there is replaced,
never followed (it could lead the token into a file others read)."""

import stat

import pytest

from hpcgrade.client_file import read as read_client_file
from hpcgrade.client_file import save as save_client_file

KEPT = {"server": "http://grader.example", "token": "secret"}


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
    save_client_file(KEPT["server"], KEPT["token"])
    assert kept_alone(client_file)


def test_a_client_file_that_others_could_read_ends_its_owners_alone(client_file):
    client_file.parent.mkdir()
    client_file.write_text('server = "http://old.example"\ntoken = "old"\n')
    client_file.chmod(0o644)
    save_client_file(KEPT["server"], KEPT["token"])
    assert kept_alone(client_file)


def test_a_symlink_at_the_client_files_path_is_replaced_not_followed(client_file, tmp_path):
    elsewhere = tmp_path / "shared.txt"
    elsewhere.write_text("someone else's\n")
    elsewhere.chmod(0o644)
    client_file.parent.mkdir()
    client_file.symlink_to(elsewhere)
    save_client_file(KEPT["server"], KEPT["token"])
    assert kept_alone(client_file)
    assert elsewhere.read_text() == "someone else's\n" and mode(elsewhere) == 0o644
