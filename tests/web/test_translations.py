"""Every message of the portal has its Spanish, with the same placeholders, in a catalogue that
matches the code and compiles; the portal then speaks the reader's language."""

import re
import subprocess
import sys
from pathlib import Path

import pytest
from babel.messages.pofile import read_po

ROOT = Path(__file__).resolve().parents[2]
CATALOGUE = ROOT / "server" / "translations" / "es" / "LC_MESSAGES" / "messages.po"


@pytest.fixture(scope="module")
def extracted(tmp_path_factory):
    template = tmp_path_factory.mktemp("pot") / "messages.pot"
    subprocess.run(
        [
            Path(sys.executable).parent / "pybabel",
            "-q",
            "extract",
            "-F",
            "babel.cfg",
            "-k",
            "_l",
            "--no-location",
            "-o",
            str(template),
            "server",
            "hpcgrade",
            "worker/cli",
        ],
        cwd=ROOT,
        check=True,
    )
    with template.open("rb") as f:
        return read_po(f)


@pytest.fixture(scope="module")
def spanish():
    with CATALOGUE.open("rb") as f:
        return read_po(f)


def test_every_message_in_the_code_is_translated(extracted, spanish):
    untranslated = []
    for message in extracted:
        if not message.id:
            continue
        found = spanish.get(message.id)
        strings = (
            ()
            if found is None
            else (found.string if isinstance(found.string, tuple) else (found.string,))
        )
        if found is None or found.fuzzy or not all(strings):
            untranslated.append(message.id)
    assert not untranslated, f"add their Spanish to {CATALOGUE.name}: {untranslated}"


def test_the_catalogue_holds_no_message_the_code_lost(extracted, spanish):
    wanted = {message.id for message in extracted}
    assert not [m.id for m in spanish if m.id and m.id not in wanted]


def test_translations_keep_the_placeholders(spanish):
    problems = [(message.id, errors) for message, errors in spanish.check()]
    assert not problems


def test_pages_and_messages_follow_the_chosen_language(course):
    client = course.test_client()
    token = re.search(r'name="csrf_token" value="([^"]+)"', client.get("/login").text).group(1)
    wrong = {"username": "ana", "password": "wrong", "csrf_token": token}
    assert "Usuario o contraseña incorrectos" in client.post("/login?lang=es", data=wrong).text
    assert "Wrong username or password" in client.post("/login?lang=en", data=wrong).text
