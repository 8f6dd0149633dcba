"""A request over the size the portal reads (32 times MAX_UPLOAD_KB), refused before any view
ran: the answer names the limit of what was sent there (a notebook's advice for a submission
only), and leads back to the page of this site it came from, never to another site."""

import pytest
from helpers import logged_in

from server.web.app import UPLOAD_CAP_FACTOR

# its queries are tested on both databases elsewhere: the pages, on the one a deployment runs
pytestmark = pytest.mark.postgresql_only

CAP_KB = UPLOAD_CAP_FACTOR * 1024  # with MAX_UPLOAD_KB's default
OVER_THE_CAP = "x" * ((CAP_KB + 1) << 10)


@pytest.mark.parametrize(
    "referrer",
    [
        "https://evil.example/phish",
        "//evil.example/phish",
        "http://localhost.evil.example/login",
        "javascript:alert(1)",
    ],
)
def test_a_referer_of_another_site_is_not_followed(course, referrer):
    client = course.test_client()
    reply = client.post(
        "/login", headers={"Referer": referrer}, data={"username": "ana", "password": OVER_THE_CAP}
    )
    assert reply.status_code == 303 and reply.headers["Location"] == "/"


def test_the_page_of_this_site_that_sent_it_is_where_it_leads(course):
    client, token = logged_in(course)
    reply = client.post(
        "/account/password?lang=es",
        headers={"Referer": "http://localhost/account/password?lang=es"},
        data={"csrf_token": token, "current": OVER_THE_CAP},
    )
    assert reply.status_code == 303 and reply.headers["Location"] == "/account/password?lang=es"


@pytest.mark.parametrize(
    "lang, message",
    [
        ("en", f"The request is larger than {CAP_KB} KB."),
        ("es", f"La petición ocupa más de {CAP_KB} KB."),
    ],
)
def test_a_form_that_is_no_upload_gets_the_requests_limit(course, lang, message):
    client, token = logged_in(course)
    reply = client.post(
        f"/account/password?lang={lang}",
        headers={"Referer": "http://localhost/account/password"},
        data={"csrf_token": token, "current": OVER_THE_CAP},
    )
    page = client.get(reply.headers["Location"]).text
    assert message in page and "Clear All Outputs" not in page


def test_the_api_names_the_requests_limit_where_no_file_is_sent(course):
    reply = course.test_client().post("/api/v1/tokens?lang=es", data={"username": OVER_THE_CAP})
    assert reply.status_code == 413
    assert reply.json == {"error": f"La petición ocupa más de {CAP_KB} KB."}
