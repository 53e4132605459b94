"""Who may review: GitHub's permissions for the user's token, and the fake's answers in GitHub's shapes."""

from __future__ import annotations

import pytest
import requests

from bot.review.access import ask_github, reviewable, role_of
from bot.review.github_user import GitHubUserError, UserClient, authorize_url, exchange_code
from tests.bot.conftest import REPO
from tests.bot.review.conftest import CLIENT_ID, CLIENT_SECRET, OTHER_REPO


@pytest.mark.parametrize("permissions,role", [
    ({"admin": True, "maintain": True, "push": True, "triage": True, "pull": True}, "admin"),
    ({"admin": False, "maintain": False, "push": False, "triage": True, "pull": True}, "triage"),
    ({"admin": False, "maintain": False, "push": False, "triage": False, "pull": True}, "pull"),
    ({}, "none"), (None, "none"),
])
def test_role_is_the_strongest_permission(permissions, role):
    assert role_of(permissions) == role


def test_only_triage_and_above_may_review():
    repos = [{"full_name": f"o/{role}", "permissions": {role: True}} for role in ("pull", "triage", "push")]
    assert sorted(reviewable([(7, repos)])) == ["o/push", "o/triage"]
    assert reviewable([(7, repos)])["o/triage"].installation_id == 7


def test_the_user_token_sees_the_installations_and_permissions_github_gives_it(review_github):
    helper = UserClient(review_github.url, review_github.user_token_for("helper"))
    assert helper.user()["login"] == "helper"
    [installation] = helper.installations()
    assert installation["id"] == 1 and installation["account"]["login"] == REPO.split("/")[0]
    [repo] = helper.installation_repositories(1)
    assert repo["full_name"] == REPO and role_of(repo["permissions"]) == "triage"
    assert {name: found.role for name, found in ask_github(helper).items()} == {REPO: "triage"}
    assert "bug" in helper.labels(REPO)
    outsider = UserClient(review_github.url, review_github.user_token_for("outsider"))
    assert list(ask_github(outsider)) == [OTHER_REPO]
    with pytest.raises(GitHubUserError) as refused:
        outsider.labels(REPO)
    assert refused.value.status == 404
    with pytest.raises(GitHubUserError) as unknown:
        UserClient(review_github.url, "ghu_unknown").user()
    assert unknown.value.status == 401


def test_the_web_flow_gives_a_user_token_once_per_code(review_github):
    review_github.sign_in_as("maintainer")
    url = authorize_url(review_github.url, CLIENT_ID, "http://127.0.0.1:1/cb", "the-state")
    consent = requests.get(url, allow_redirects=False, timeout=5)
    location = consent.headers["Location"]
    assert consent.status_code == 302 and location.startswith("http://127.0.0.1:1/cb?")
    assert "state=the-state" in location
    code = location.split("code=")[1].split("&")[0]
    token = exchange_code(review_github.url, CLIENT_ID, CLIENT_SECRET, code, "http://127.0.0.1:1/cb")
    assert UserClient(review_github.url, token).user()["login"] == "maintainer"
    with pytest.raises(GitHubUserError, match="bad_verification_code"):
        exchange_code(review_github.url, CLIENT_ID, CLIENT_SECRET, code, "http://127.0.0.1:1/cb")
    with pytest.raises(GitHubUserError, match="incorrect_client_credentials"):
        exchange_code(review_github.url, CLIENT_ID, "wrong", code, "http://127.0.0.1:1/cb")
