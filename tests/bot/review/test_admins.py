"""Operators are GitHub user ids: GitHub frees a login when its owner renames, and whoever takes it once
became an operator of the instance, since ISSUE_SORTER_ADMINS named logins. A login in
the setting is bound to the first account that signs in with it; an id is taken as it is."""

from __future__ import annotations

import dataclasses

import pytest

from bot.app import create_app
from bot.review.admins import BOUND_KEY
from simulation.fake_github import _user_json
from tests.bot.review.conftest import sign_in

pytestmark = pytest.mark.redis


def _id(login: str) -> int:
    return _user_json("", login)["id"]  # the fake's id of an account


def _client(review_settings, redis, admins: tuple[str, ...]):
    return create_app(dataclasses.replace(review_settings, admins=admins), redis=redis).test_client()


def test_a_login_is_bound_to_the_first_account_that_signs_in_with_it(review_settings, redis, review_github,
                                                                     sessions):
    client = _client(review_settings, redis, ("Boss",))
    sign_in(client, review_github, "boss")
    assert client.get("/review/operator").status_code == 200
    assert redis.hget(BOUND_KEY, "boss") == str(_id("boss")).encode()


def test_whoever_takes_an_admins_freed_login_is_no_operator(review_settings, redis, review_github, sessions):
    redis.hset(BOUND_KEY, "boss", 4242)  # the account that held "boss" when it signed in, since renamed
    client = _client(review_settings, redis, ("boss",))
    sign_in(client, review_github, "boss")  # a new account under the freed login
    assert client.get("/review/operator").status_code == 404
    assert redis.hget(BOUND_KEY, "boss") == b"4242"


def test_an_id_in_the_setting_is_an_admin_whatever_its_login(review_settings, redis, review_github, sessions):
    client = _client(review_settings, redis, (str(_id("maintainer")),))
    sign_in(client, review_github, "maintainer")
    assert client.get("/review/operator").status_code == 200
    other = _client(review_settings, redis, (str(_id("maintainer")),))
    sign_in(other, review_github, "boss")
    assert other.get("/review/operator").status_code == 404
