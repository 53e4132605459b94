"""The web process as a stranger meets it: no webhook secret, no sign-in. Hundreds of unsigned junk
deliveries with long, odd X-GitHub-Event names once grew Redis by about 2.6 KB each (a permanent counter
field per name; compose runs Redis with noeviction, so enough of them stop the queues), and a non-ASCII
OAuth `state` answered 500 (hmac.compare_digest on str). Real Redis, the app in process."""

from __future__ import annotations

import json
import random
import string

import pytest

from bot.app import create_app
from bot.intake.signatures import sign_body
from core import metrics
from tests.bot.review.conftest import review_app, review_github, review_settings, sign_in  # noqa: F401
from tests.conftest import WEBHOOK_SECRET

pytestmark = [pytest.mark.redis]

JUNK = 300
ODD = string.ascii_letters + string.digits + string.punctuation + " \t" + "éüß\xa0\xff"


def _junk_event(rng: random.Random) -> str:
    return "".join(rng.choice(ODD) for _ in range(2048)).strip() or "x"


def test_hundreds_of_unsigned_junk_deliveries_do_not_grow_redis(app_settings, redis):
    client, rng = create_app(app_settings, redis=redis).test_client(), random.Random(26)
    keys, names = set(redis.keys()), []
    for n in range(JUNK):
        names.append(_junk_event(rng))
        headers = {"X-GitHub-Event": names[-1], "X-GitHub-Delivery": _junk_event(rng)[:200],
                   "Content-Type": "application/json"}
        if n % 3 == 1:
            headers["X-Hub-Signature-256"] = "sha256=" + "0" * 64
        if n % 3 == 2:
            headers["X-Hub-Signature-256"] = "sha1=" + _junk_event(rng)[:100]
        assert client.post("/webhook", data=json.dumps({"n": n, "pad": "x" * 1000}), headers=headers
                           ).status_code == 401
    assert set(redis.keys()) - keys <= {metrics.DELIVERIES_KEY.encode()}
    assert {field.decode(): int(count) for field, count in redis.hgetall(metrics.DELIVERIES_KEY).items()} == {
        "unsigned|rejected": JUNK}
    assert redis.memory_usage(metrics.DELIVERIES_KEY) < 1024  # was about 780 KB


def test_signed_deliveries_of_unknown_events_share_one_counter(app_settings, redis):
    client, rng = create_app(app_settings, redis=redis).test_client(), random.Random(62)
    for n in range(50):
        body = json.dumps({"action": "opened", "n": n}).encode()
        response = client.post("/webhook", data=body, headers={
            "X-GitHub-Event": _junk_event(rng)[:300], "X-GitHub-Delivery": f"odd-{n}",
            "X-Hub-Signature-256": sign_body(body, WEBHOOK_SECRET), "Content-Type": "application/json"})
        assert response.status_code == 204
    assert {field.decode(): int(count) for field, count in redis.hgetall(metrics.DELIVERIES_KEY).items()} == {
        "other|ignored": 50}


ODD_STATES = ["é", "状态", "\x00", "a" * 10_000, "%ff", "' OR 1=1 --", "<script>", " ", ""]


@pytest.mark.parametrize("state", ODD_STATES)
def test_odd_oauth_states_answer_the_sign_in_page_never_500(review_app, review_github, state):
    client = review_app.test_client()
    assert client.get("/review/sign-in/github").status_code == 302  # a real sign-in start: a state to compare
    response = client.get("/review/oauth/callback", query_string={"state": state, "code": "c"})
    assert response.status_code == 302 and response.headers["Location"].endswith("/review/sign-in")
    fresh = review_app.test_client()  # no sign-in started: nothing to compare with
    assert fresh.get("/review/oauth/callback", query_string={"state": state}).status_code == 302


def test_a_raw_non_utf8_state_is_the_sign_in_page(review_app, review_github):
    client = review_app.test_client()
    client.get("/review/sign-in/github")
    response = client.get("/review/oauth/callback?state=%C3%28%FF&code=c")
    assert response.status_code == 302 and response.headers["Location"].endswith("/review/sign-in")


def test_the_right_state_still_signs_in(review_app, review_github):
    assert sign_in(review_app.test_client(), review_github, "maintainer").status_code == 302
