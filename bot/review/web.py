"""The review page's wiring into the Flask app: signed sessions, CSRF, the proxy rule, the blueprint."""

from __future__ import annotations

import datetime as dt
import logging

from flask import Flask, Response, request
from flask.sessions import SecureCookieSessionInterface
from flask_wtf.csrf import CSRFProtect
from sqlalchemy.orm import sessionmaker
from werkzeug.middleware.proxy_fix import ProxyFix

from bot.review import views
from bot.review.access import SESSION_TTL
from core.settings import Settings

log = logging.getLogger(__name__)


class ReviewSessionInterface(SecureCookieSessionInterface):
    """Flask's signed cookie session, marked Secure whenever the request came over HTTPS."""

    def get_cookie_secure(self, app: Flask) -> bool:
        return request.is_secure or super().get_cookie_secure(app)

    def get_cookie_name(self, app: Flask) -> str:
        # over HTTPS, the __Host- prefix makes the browser refuse the cookie unless it is Secure, for Path=/
        # and without Domain: neither plain HTTP nor a sibling subdomain can plant or overwrite a session
        name = super().get_cookie_name(app)
        return f"__Host-{name}" if request.is_secure else name


def forbid_framing(response: Response) -> Response:
    """No page of the review site inside another site's frame (clickjacking of its buttons)."""
    if request.blueprint == "review":
        response.headers.setdefault("Content-Security-Policy", "frame-ancestors 'none'")
        response.headers.setdefault("X-Frame-Options", "DENY")  # for browsers without CSP level 2
    return response


def install(app: Flask, settings: Settings) -> None:
    """Serve the review page under /review when the App's OAuth client is configured; else it is 404."""
    if settings.trusted_proxies:  # believe X-Forwarded-Proto/Host only from proxies we were told about
        hops = settings.trusted_proxies
        app.wsgi_app = ProxyFix(app.wsgi_app, x_for=hops, x_proto=hops, x_host=hops, x_port=hops)
    if not settings.review_enabled:
        log.info("review page off: set GITHUB_CLIENT_ID, GITHUB_CLIENT_SECRET and "
                 "ISSUE_SORTER_SESSION_SECRET to let maintainers sign in")
        return
    app.secret_key = settings.session_secret
    app.config.update(SESSION_COOKIE_NAME="issue_sorter_session", SESSION_COOKIE_HTTPONLY=True,
                      SESSION_COOKIE_SAMESITE="Lax", SESSION_COOKIE_PATH="/",
                      PERMANENT_SESSION_LIFETIME=dt.timedelta(seconds=SESSION_TTL),
                      # only the review page's forms are checked: /webhook is signed by GitHub instead
                      WTF_CSRF_CHECK_DEFAULT=False)
    app.session_interface = ReviewSessionInterface()
    CSRFProtect(app)
    app.extensions["review"] = {"sessions": sessionmaker(bind=app.extensions["bot"]["engine"],
                                                         expire_on_commit=False)}
    app.register_blueprint(views.blueprint)
    app.after_request(forbid_framing)
    log.info("review page on at /review (sign-in through %s)", settings.web_url)
