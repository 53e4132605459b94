"""The review page's session cookie over HTTPS is a __Host- cookie (the browser then refuses one planted by
plain HTTP or a sibling subdomain), and no page of it may be framed by another site."""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest
import requests

from tests.bot.review.conftest import sign_in

pytestmark = [pytest.mark.redis]


def test_over_https_the_session_cookie_is_a_host_cookie(review_app, review_github):
    client = review_app.test_client()
    cookie = client.get("/review/sign-in/github", base_url="https://localhost").headers["Set-Cookie"]
    assert cookie.startswith("__Host-issue_sorter_session=")
    assert "Secure" in cookie and "Path=/;" in cookie + ";" and "Domain" not in cookie


def test_over_https_a_sign_in_round_trips_with_the_host_cookie(review_app, review_github, sessions):
    client, https = review_app.test_client(), "https://localhost"
    review_github.sign_in_as("maintainer")
    start = client.get("/review/sign-in/github", base_url=https)
    consent = requests.get(start.headers["Location"], allow_redirects=False, timeout=5)
    back = urlsplit(consent.headers["Location"])
    assert client.get(f"{back.path}?{back.query}", base_url=https).headers["Location"] == "/review/"
    assert client.get("/review/", base_url=https).status_code == 200


def test_over_plain_http_the_cookie_keeps_its_name(review_app, review_github):
    cookie = review_app.test_client().get("/review/sign-in/github").headers["Set-Cookie"]
    assert cookie.startswith("issue_sorter_session=")


def test_review_pages_may_not_be_framed(review_app, review_github, sessions):
    client = review_app.test_client()
    for response in (client.get("/review/sign-in"), sign_in(client, review_github, "maintainer"),
                     client.get("/review/")):
        assert response.headers["Content-Security-Policy"] == "frame-ancestors 'none'"
        assert response.headers["X-Frame-Options"] == "DENY"
