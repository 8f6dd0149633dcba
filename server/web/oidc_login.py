"""Log-in through the centre's OpenID Connect provider (OIDC_ISSUER), beside local accounts.

The authorization code flow with PKCE (S256), a state and a nonce, through Authlib's Flask
client: the provider's endpoints and keys come from its discovery document, fetched at the first
log-in and kept. The ID token's signature, issuer, audience, expiry and nonce are checked before
anything of it is believed; claims the ID token leaves out (many providers put only `sub` there)
are read from the userinfo endpoint. The person then gets the account of that username (made at
the first log-in, never a local one: server/core/directory.py) and the courses their groups
give.

Logging out ends hpcgrade's sessions only, not the person's session at the provider: that one
is the centre's single sign-on for its other services too, which a log-out here should not end.
"""

from __future__ import annotations

from authlib.common.errors import AuthlibBaseError
from authlib.integrations.base_client import MismatchingStateError
from authlib.integrations.flask_client import OAuth
from flask import (
    Blueprint,
    abort,
    current_app,
    flash,
    redirect,
    render_template,
    request,
    session,
    url_for,
)
from flask_babel import gettext as _
from joserfc.errors import JoseError
from requests import RequestException

from server.core.config import app_settings
from server.core.directory import DirectoryError, Person, account_for, apply_groups
from server.core.models import AuthSource, User
from server.web.auth import db, safe_next, start_session

blueprint = Blueprint("oidc_login", __name__)
CLIENT = "centre"
EXTENSION = "hpcgrade.oidc"
TIMEOUT_SECONDS = 10  # a provider that hangs must not hold a web worker for long
NEXT_KEY = "oidc_next"


class LoginRefused(Exception):
    """The log-in cannot go on: the message for the person, and the page's HTTP status."""

    def __init__(self, message: str, status: int):
        super().__init__(message)
        self.message, self.status = message, status


@blueprint.app_context_processor
def single_sign_on_button() -> dict:
    """The log-in page's button: its text, or None where no provider is configured."""
    settings = app_settings()
    return {
        "oidc_label": (settings.oidc_label or _("University account"))
        if settings.oidc_issuer
        else None
    }


@blueprint.get("/login/oidc")
def start():
    provider = _client()
    session[NEXT_KEY] = safe_next(request.args.get("next"))
    try:
        _check_issuer(provider)
        return provider.authorize_redirect(url_for(".callback", _external=True))
    except LoginRefused as refused:
        return _refused(refused)
    except (RequestException, ValueError):  # unreachable, or not JSON
        return _refused(_unreachable())


@blueprint.get("/login/oidc/callback")
def callback():
    provider = _client()
    try:
        person = _person(provider)
        user = _account(person)
    except LoginRefused as refused:
        return _refused(refused)
    next_page = session.get(NEXT_KEY)
    start_session(user)
    return redirect(safe_next(next_page))


def _client():
    """Authlib's client for the provider, made at the app's first log-in through it."""
    settings = app_settings()
    if not settings.oidc_issuer:
        abort(404)
    app = current_app._get_current_object()
    if EXTENSION not in app.extensions:
        oauth = OAuth(app)
        oauth.register(
            CLIENT,
            client_id=settings.oidc_client_id,
            client_secret=settings.oidc_client_secret,
            server_metadata_url=f"{settings.oidc_issuer}/.well-known/openid-configuration",
            client_kwargs={
                "scope": " ".join(settings.oidc_scopes),
                "code_challenge_method": "S256",
                "default_timeout": TIMEOUT_SECONDS,
            },
        )
        app.extensions[EXTENSION] = oauth
    return app.extensions[EXTENSION].create_client(CLIENT)


def _check_issuer(provider) -> None:
    """The discovery document must be the configured issuer's own (OpenID Connect Discovery
    §4.3): the ID token's issuer is checked against the document's."""
    if provider.load_server_metadata().get("issuer") != app_settings().oidc_issuer:
        raise LoginRefused(
            _("The single sign-on service is misconfigured: ask the administrators."), 502
        )


def _person(provider) -> Person:
    """Who the provider vouches for, from the answer it sent the browser back with."""
    if request.args.get("error") == "access_denied":
        raise LoginRefused(_("The log-in was cancelled at the single sign-on service."), 403)
    if request.args.get("error"):
        raise LoginRefused(
            _(
                "The single sign-on service refused the log-in (%(error)s).",
                error=request.args["error"],
            ),
            400,
        )
    # RFC 9207: an answer that names another issuer was meant for another provider
    if request.args.get("iss", app_settings().oidc_issuer) != app_settings().oidc_issuer:
        raise LoginRefused(_("This log-in came from another sign-on service: log in again."), 400)
    try:
        _check_issuer(provider)
        token = provider.authorize_access_token()
        claims = dict(token.get("userinfo") or {})
        if not claims:  # no ID token: nothing says who this is
            raise JoseError("the token response holds no ID token")
        return _from_claims(provider, token, claims)
    except MismatchingStateError:
        raise LoginRefused(
            _("This log-in has expired or was already used: log in again."), 400
        ) from None
    except RequestException:
        raise _unreachable() from None
    except JoseError:
        raise LoginRefused(
            _(
                "The single sign-on service's answer could not be verified: log "
                "in again, and tell the administrators if it happens again."
            ),
            502,
        ) from None
    except AuthlibBaseError:  # the provider refused the code: replayed, expired, PKCE wrong
        raise LoginRefused(
            _("The single sign-on service did not confirm this log-in: log in again."), 400
        ) from None


def _from_claims(provider, token: dict, claims: dict) -> Person:
    settings = app_settings()
    wanted = (settings.oidc_username_claim, settings.oidc_groups_claim)
    if any(claim not in claims for claim in wanted) and provider.load_server_metadata().get(
        "userinfo_endpoint"
    ):
        userinfo = provider.userinfo(token=token)
        if userinfo.get("sub") != claims["sub"]:  # OpenID Connect Core §5.3.2
            raise JoseError("the userinfo is another person's")
        claims = {**userinfo, **claims}
    username = claims.get(settings.oidc_username_claim)
    if not isinstance(username, str) or not username:
        raise LoginRefused(
            _("The single sign-on service did not say your username: ask the administrators."), 403
        )
    groups = claims.get(settings.oidc_groups_claim) or []
    if isinstance(groups, str):  # some providers send one group as a string
        groups = [groups]
    return Person(
        username=username,
        name=str(claims.get("name") or ""),
        email=str(claims.get("email") or ""),
        groups=frozenset(group for group in groups if isinstance(group, str)),
        subject=str(claims["sub"]),
        given_name=str(claims.get("given_name") or ""),
        family_name=str(claims.get("family_name") or ""),
    )


def _account(person: Person) -> User:
    session_ = db()
    try:
        user = account_for(session_, person, AuthSource.oidc)
        apply_groups(session_, user, person.groups)
    except DirectoryError as refusal:
        session_.rollback()
        current_app.logger.warning("single sign-on of %s refused: %s", person.username, refusal)
        raise LoginRefused(
            _(
                "Your account at the single sign-on service cannot log in here: "
                "%(reason)s. Ask the administrators.",
                reason=str(refusal),
            ),
            403,
        ) from None
    session_.commit()
    return user


def _unreachable() -> LoginRefused:
    return LoginRefused(
        _("The single sign-on service cannot be reached just now: try again in a few minutes."), 503
    )


def _refused(refused: LoginRefused):
    flash(refused.message, "error")
    return render_template(
        "auth/login.html", login_next=session.pop(NEXT_KEY, None)
    ), refused.status
