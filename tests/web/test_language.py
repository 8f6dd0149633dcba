"""The reader's language: chosen on the log-in page, it survives logging in (and `next=` with
it); every page says which it is in; error pages in the site's layout and the reader's language;
run states, sections and counts translated; the grader's own Spanish."""

import html
import re

import pytest
from flask import render_template_string
from helpers import CSRF_TOKEN, log_in
from sqlalchemy import select
from sqlalchemy.exc import OperationalError

from server.core.models import Exercise
from server.core.users import add_user
from worker.harness import submission
from worker.harness.codes import CATALOGUE, WRONG_NUMBER, WRONG_TYPE
from worker.harness.diagnostics import Diagnostic
from worker.harness.session import EARLIER, NOT_RUN

# its queries are tested on both databases elsewhere: the pages, on the one a deployment runs
pytestmark = pytest.mark.postgresql_only


def switch_link(page: str) -> tuple[str, str]:
    """The language switch of a page: (its href, its hreflang)."""
    found = re.search(r'<a href="([^"]*)" hreflang="(\w+)" lang="\2">', page)
    return html.unescape(found.group(1)), found.group(2)


def html_lang(page: str) -> str:
    return re.search(r'<html lang="(\w+)">', page).group(1)


@pytest.fixture
def staffed(course):
    with course.app_context():
        session = course.extensions["hpcgrade.db"].sessions()
        add_user(session, "prof", "Pilar", "p@uni.es", "instructor", "long-password")
        session.commit()
    return course


def test_spanish_chosen_on_the_login_page_survives_logging_in_and_next(course):
    client = course.test_client()
    asked = client.get("/courses/pytorch/exercises/autograd-q")
    assert (
        asked.status_code == 302
        and asked.headers["Location"] == "/login?next=/courses/pytorch/exercises/autograd-q"
    )
    login = client.get(asked.headers["Location"])
    href, hreflang = switch_link(login.text)
    assert hreflang == "es" and href == "/login?next=/courses/pytorch/exercises/autograd-q&lang=es"
    spanish_login = client.get(href)
    assert html_lang(spanish_login.text) == "es" and "Entrar" in spanish_login.text
    # the form has no action: a browser sends it to the page's own address, query included
    landed = log_in(client, path=href)
    assert (
        landed.status_code == 302
        and landed.headers["Location"] == "/courses/pytorch/exercises/autograd-q"
    )
    page = client.get(landed.headers["Location"])
    assert html_lang(page.text) == "es" and "Gradientes de una función no escalar" in page.text
    assert switch_link(page.text) == ("/courses/pytorch/exercises/autograd-q?lang=en", "en")
    # logging out forgets the user, not the language
    token = CSRF_TOKEN.search(page.text).group(1)
    client.post("/logout", data={"csrf_token": token})
    assert html_lang(client.get("/login").text) == "es"


def test_the_switch_link_keeps_the_page_and_its_query(course):
    client = course.test_client()
    log_in(client)
    page = client.get("/courses/pytorch/submissions?lang=es&sort=date&sort=score")
    assert html_lang(page.text) == "es"
    assert switch_link(page.text) == (
        "/courses/pytorch/submissions?sort=date&sort=score&lang=en",
        "en",
    )
    assert html_lang(client.get("/courses/pytorch/submissions").text) == "es"  # remembered
    english = client.get(switch_link(page.text)[0])
    assert html_lang(english.text) == "en" and "My submissions" in english.text


@pytest.mark.parametrize("lang", ["en", "es"])
def test_every_page_says_its_language(staffed, lang):
    client = staffed.test_client()
    log_in(client, username="prof")
    client.get(f"/courses/pytorch/?lang={lang}")
    for url in [
        "/courses/pytorch/",
        "/courses/pytorch/submissions",
        "/courses/pytorch/exercises/autograd-q",
        "/account/tokens",
        "/account/password",
        "/courses/pytorch/staff/",
        "/no-such-page",
    ]:
        page = client.get(url)
        assert html_lang(page.text) == lang, url
        assert switch_link(page.text)[1] == ("es" if lang == "en" else "en"), url


@pytest.mark.parametrize(
    "lang, title, courses, exercises",
    [
        ("en", "Page not found", "Go to my courses", "Go to the exercises"),
        ("es", "Página no encontrada", "Ir a mis cursos", "Ir a los ejercicios"),
    ],
)
def test_not_found_is_a_page_of_the_site(course, lang, title, courses, exercises):
    """Outside a course, the way back is the user's courses; in one, its exercises."""
    client = course.test_client()
    log_in(client)
    for url, back in [
        ("/no-such-page", f'<a href="/">{courses}</a>'),
        (
            "/courses/pytorch/exercises/no-such-exercise",
            f'<a href="/courses/pytorch/">{exercises}</a>',
        ),
        ("/courses/pytorch/submissions/999999", f'<a href="/courses/pytorch/">{exercises}</a>'),
    ]:
        page = client.get(f"{url}?lang={lang}")
        assert page.status_code == 404 and page.mimetype == "text/html"
        assert f"<h1>{title}</h1>" in page.text
        assert f"<title>{title} · hpcgrade</title>" in page.text
        assert html_lang(page.text) == lang and 'class="bar"' in page.text  # base.html's layout
        assert back in page.text, url


def test_forbidden_method_and_bad_request_pages(course):
    client = course.test_client()
    log_in(client)
    forbidden = client.get("/courses/pytorch/staff/?lang=es")
    assert forbidden.status_code == 403 and "Acceso no permitido" in forbidden.text
    assert "Ir a los ejercicios" in forbidden.text and "Ir al curso" not in forbidden.text
    not_here = client.get("/logout?lang=es")
    assert not_here.status_code == 405 and "POST" in not_here.headers["Allow"]
    assert "Aquí no se puede hacer eso" in not_here.text and html_lang(not_here.text) == "es"
    # raised with its own message, in the reader's language: that one is shown
    nul = client.get("/courses/pytorch/submissions?lang=es&q=a%00b")
    assert nul.status_code == 400 and "No se entendió la petición" in nul.text
    assert "byte NUL" in nul.text and html_lang(nul.text) == "es"


def test_logged_out_error_pages_offer_the_login(course):
    page = course.test_client().get("/nothing-here", headers={"Accept-Language": "es"})
    assert page.status_code == 404 and html_lang(page.text) == "es"
    assert '<a href="/login">Entrar</a>' in page.text


def test_server_error_page(course, monkeypatch):
    course.config["PROPAGATE_EXCEPTIONS"] = False  # as in production: answered, not raised

    def broken():
        raise RuntimeError("a bug")

    monkeypatch.setitem(course.view_functions, "portal.history", broken)
    client = course.test_client()
    log_in(client)
    page = client.get("/courses/pytorch/submissions?lang=es")
    assert page.status_code == 500 and "Algo ha fallado por nuestra parte" in page.text
    assert html_lang(page.text) == "es" and "Ir a los ejercicios" in page.text


def test_an_unreachable_database_is_said_in_the_readers_language(course):
    def database_down():  # before every other hook, as when loading the user fails
        raise OperationalError("SELECT 1", {}, Exception("connection refused"))

    course.before_request_funcs.setdefault(None, []).insert(0, database_down)
    page = course.test_client().get("/courses/pytorch/?lang=es")
    assert page.status_code == 503 and html_lang(page.text) == "es"
    assert "No se puede acceder a la base de datos" in page.text


def test_api_errors_stay_json(course):
    reply = course.test_client().get("/api/v1/no-such-thing?lang=es")
    assert reply.status_code in (401, 404) and reply.is_json and reply.json["error"]


@pytest.mark.parametrize(
    "lang, explained, reason, back",
    [
        (
            "en",
            "The form expired; reload the page and send it again.",
            "The CSRF token is missing.",
            "Back to the form",
        ),
        (
            "es",
            "El formulario ha caducado; recarga la página y vuelve a enviarlo.",
            "Falta el token CSRF.",
            "Volver al formulario",
        ),
    ],
)
def test_an_expired_form_is_explained(course, lang, explained, reason, back):
    client = course.test_client()
    form_page = f"http://localhost/login?next=/submissions&lang={lang}"
    client.get(form_page)
    refused = client.post(
        f"/login?next=/submissions&lang={lang}",
        data={"username": "ana", "password": "long-password"},
        headers={"Referer": form_page},
    )
    assert refused.status_code == 400 and html_lang(refused.text) == lang
    assert explained in refused.text and reason in refused.text
    assert f'<a href="/login?next=/submissions&amp;lang={lang}">{back}</a>' in refused.text


def test_an_expired_form_never_links_to_another_site(course):
    refused = course.test_client().post(
        "/login", data={}, headers={"Referer": "http://localhost//evil.example/x"}
    )
    assert refused.status_code == 400 and "evil.example" not in refused.text
    elsewhere = course.test_client().post(
        "/login", data={}, headers={"Referer": "https://evil.example/login"}
    )
    assert "evil.example" not in elsewhere.text and "Back to the form" not in elsewhere.text


def test_run_states_and_sections_are_translated(course):
    with course.test_request_context("/?lang=es"):
        rendered = render_template_string(
            "{% for s in ['queued', 'running', 'graded', 'error', 'cancelled', 'done', 'failed',"
            " 'lost'] %}{{ s|state }}|{% endfor %}{{ 'tensors'|section }}|{{ 'autograd'|section }}"
            "|{{ 'other'|section }}"
        )
    assert rendered == (
        "en cola|corrigiendo|corregida|error del corrector|cancelada|terminada|"
        "fallida|perdida|Tensores|Autograd|other"
    )
    client = course.test_client()
    log_in(client)
    listed = client.get("/courses/pytorch/?lang=es").text
    assert "Tensores" in listed and ">tensors<" not in listed
    token = CSRF_TOKEN.search(listed).group(1)
    client.post(
        "/courses/pytorch/exercises/autograd-q/submissions",
        data={"csrf_token": token, "code": "def q_grads(a, b, v):\n    pass\n"},
    )
    assert "en cola" in client.get("/courses/pytorch/submissions").text


def test_counts_agree_with_their_nouns(staffed):
    client = staffed.test_client()
    log_in(client, username="prof")
    assert "2 estudiantes" in client.get("/courses/pytorch/staff/?lang=es").text
    with staffed.test_request_context("/?lang=es"):
        one = render_template_string('{{ ngettext("%(num)s student", "%(num)s students", 1) }}')
    assert one == "1 estudiante"


def test_a_single_attempt_is_not_all_1_attempts(course):
    with course.app_context():
        session = course.extensions["hpcgrade.db"].sessions()
        session.scalar(select(Exercise).where(Exercise.slug == "autograd-q")).max_attempts = 1
        session.commit()
    client = course.test_client()
    log_in(client)
    token = CSRF_TOKEN.search(client.get("/courses/pytorch/?lang=es").text).group(1)
    code = {"csrf_token": token, "code": "def q_grads(a, b, v):\n    pass\n"}
    assert (
        client.post("/courses/pytorch/exercises/autograd-q/submissions", data=code).status_code
        == 303
    )
    again = client.post(
        "/courses/pytorch/exercises/autograd-q/submissions", data=code, follow_redirects=True
    )
    assert "Ya has usado el único intento de este ejercicio." in again.text
    assert (
        "Ya has usado el único intento" in client.get("/courses/pytorch/exercises/autograd-q").text
    )


def test_the_grader_says_which_checks_stopped_and_why_this_one_did_not_run():
    stopped = Diagnostic("timeout", {"seconds": 5, "what": EARLIER, "hint": NOT_RUN})
    message, hint = stopped.text("es")
    assert message == (
        "la ejecución de 3 comprobaciones anteriores no terminó en el tiempo permitido."
    )
    assert hint.startswith(
        "Tu código falló en 3 comprobaciones, así que las restantes, incluida "
        "esta, no se ejecutaron"
    )
    message, hint = Diagnostic("crashed", {"what": EARLIER, "hint": NOT_RUN}).text("en")
    assert message == (
        "The process running your code stopped unexpectedly during 3 earlier checks."
    )
    assert "were not run" in hint


def test_the_graders_spanish():
    spanish = [
        text for texts in [*CATALOGUE.values(), WRONG_TYPE, WRONG_NUMBER] for text in texts[2:]
    ]
    assert not [t for t in spanish if "en el sitio" in t]  # in-place is «in situ»
    assert not [t for t in spanish if "(s)" in t]  # no "archivo(s)": worded to need no plural
    inplace, _ = Diagnostic("inplace-modified", {"what": "`f`"}).text("es")
    assert (
        inplace == "`f`: se modificó «in situ» un tensor que autograd necesitaba para el paso "
        "hacia atrás."
    )
    leak, _ = Diagnostic("temp-file-leak", {"what": "`pack`", "count": 1}).text("es")
    assert leak.endswith("(archivos que quedaron: 1).")
    with pytest.raises(submission.Unreadable) as too_big:
        submission.read(b"#" * 2_000_000, "a.py", 1_048_576)
    assert too_big.value.es == (
        "El archivo tiene 2\u00a0000\u00a0000 bytes; el límite es 1\u00a0048\u00a0576."
    )
