"""The portal's CSRF protection: made here, bound by the app factory, and relaxed by the API's
blueprint (bearer tokens, not cookies), so that neither imports the other."""

from flask_wtf import CSRFProtect

csrf = CSRFProtect()
