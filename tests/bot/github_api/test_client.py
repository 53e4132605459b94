"""bot.github_api.client over real HTTP: GitHubApp -> PyGithub -> FakeGitHub on loopback, no mocks."""

from __future__ import annotations

import datetime
import json
import time

import pytest
import requests
from github import Auth

from bot.github_api.client import GitHubApp, PermanentGitHubError, TransientGitHubError
from bot.github_api.issues import IssueSnapshot
from simulation.fake_github import FakeGitHub, generate_app_keypair
from tests.paths import API_RECORDINGS

APP_ID = 4242
INSTALLATION_ID = 7
REPO = "octo-org/hello"
ODD_LABEL = "Label with spaces and strange characters (&*#$)"  # the name PyGithub's own recordings use
CREATED = datetime.datetime(2024, 3, 1, 12, 0, tzinfo=datetime.UTC)


@pytest.fixture
def fake_github(app_key):
    fake = FakeGitHub(APP_ID, app_key[1])
    fake.add_repo(REPO, labels=["bug", "enhancement", ODD_LABEL], installation_id=INSTALLATION_ID,
                  files={".github/issue-sorter.yml": "threshold: 0.7\nnote: café\n"},
                  collaborators={"ada": "admin", "max": "maintain", "wri": "write", "tri": "triage",
                                 "rea": "read"})
    fake.add_issue(REPO, 1, "Crash on start", "Traceback ...", labels=["bug"], author="alice",
                   created_at=CREATED)
    fake.add_issue(REPO, 2, "Add dark mode", None, author="bob", is_pull_request=True, state="closed",
                   created_at=CREATED + datetime.timedelta(days=1))
    with fake:
        yield fake


@pytest.fixture
def app(fake_github, app_key) -> GitHubApp:
    return GitHubApp(APP_ID, app_key[0], fake_github.url, write_interval=0, timeout=5)


@pytest.fixture
def writer(app):
    return app.writer_for(INSTALLATION_ID)


def token_posts(fake: FakeGitHub) -> list:
    return fake.calls("POST", rf"/app/installations/{INSTALLATION_ID}/access_tokens")


# --- the installation token ----------------------------------------------------------------------

def test_installation_token_is_fetched_once_and_reused_across_calls(app, writer, fake_github):
    writer.list_labels(REPO)
    writer.get_issue(REPO, 1)
    app.writer_for(INSTALLATION_ID).add_labels(REPO, 1, ["enhancement"])

    assert app.writer_for(INSTALLATION_ID) is writer
    assert len(token_posts(fake_github)) == 1
    assert all(r.status < 400 for r in fake_github.requests)


def test_installation_token_is_refreshed_after_it_expires(writer, fake_github):
    """PyGithub renews a token 20 s before it expires; GitHub's expires_at has whole seconds, so a
    21.5 s token stays fresh on the client for 0.5 to 1.5 s."""
    fake_github.token_ttl = 21.5
    writer.get_issue(REPO, 1)
    writer.get_issue(REPO, 1)
    assert len(token_posts(fake_github)) == 1

    time.sleep(max(0.0, fake_github.issued_tokens[0].expires_at - 20 - time.time()) + 0.1)
    writer.get_issue(REPO, 1)

    assert len(token_posts(fake_github)) == 2
    assert all(r.status == 200 for r in fake_github.calls("GET", rf"/repos/{REPO}/issues/1"))


def test_an_installation_cannot_reach_another_installations_repository(app, fake_github):
    fake_github.add_repo("other-org/private", installation_id=99)
    fake_github.add_issue("other-org/private", 1, "secret", "")

    with pytest.raises(PermanentGitHubError) as caught:
        app.writer_for(INSTALLATION_ID).get_issue("other-org/private", 1)
    assert caught.value.status == 404
    assert app.writer_for(99).get_issue("other-org/private", 1).title == "secret"


def test_bad_private_key_fails_at_start_with_the_fix_named():
    with pytest.raises(ValueError, match="PEM RSA private key"):
        GitHubApp(APP_ID, "not a key")


def test_a_key_that_is_no_rsa_key_fails_at_start():
    """GitHub signs Apps' JWTs with RS256 only: an EC key in PEM is refused before the first job."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    pem = ec.generate_private_key(ec.SECP256R1()).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()).decode()
    with pytest.raises(ValueError, match="PEM RSA private key"):
        GitHubApp(APP_ID, pem)


def test_the_private_key_is_parsed_once_for_every_installations_token(app_key, fake_github, monkeypatch):
    """Parsing the PEM checks the RSA key (about 80 ms on 2 cores): a worker labelling for many
    installations parses it once, at start, and signs each token's JWT with the parsed key."""
    import jwt.algorithms
    from cryptography.hazmat.primitives import serialization

    parsed = []
    real = serialization.load_pem_private_key

    def counting(*args, **kwargs):
        parsed.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(serialization, "load_pem_private_key", counting)
    monkeypatch.setattr(jwt.algorithms, "load_pem_private_key", counting)  # PyJWT's own reference
    for installation in (21, 22, 23):
        fake_github.add_repo(f"org-{installation}/repo", installation_id=installation)
        fake_github.add_issue(f"org-{installation}/repo", 1, "Crash", "")
    app = GitHubApp(APP_ID, app_key[0], fake_github.url, write_interval=0, timeout=5)
    for installation in (21, 22, 23):
        assert app.writer_for(installation).get_issue(f"org-{installation}/repo", 1).title == "Crash"

    # each installation's token, each JWT accepted by GitHub
    assert len(fake_github.calls("POST", r"/app/installations/2[123]/access_tokens")) == 3
    assert all(r.status < 400 for r in fake_github.requests)
    assert len(parsed) == 1


# --- writes ----------------------------------------------------------------------------------------

def test_add_labels_sends_exactly_one_post_with_the_labels(writer, fake_github):
    writer.add_labels(REPO, 1, ["enhancement", "needs triage"])

    posts = fake_github.calls("POST", rf"/repos/{REPO}/issues/1/labels")
    assert [p.json for p in posts] == [["enhancement", "needs triage"]]
    assert fake_github.calls("GET", rf"/repos/{REPO}.*") == []  # lazy: no fetch before the write
    assert fake_github.issue_labels(REPO, 1) == ["bug", "enhancement", "needs triage"]


def test_add_labels_with_nothing_to_add_makes_no_request(writer, fake_github):
    writer.add_labels(REPO, 1, [])
    assert fake_github.requests == []


@pytest.mark.parametrize("label", [ODD_LABEL, "area/api", "100% done", "good first issue 🐣",
                                   "bug, confirmed", "🐛🐞", "x" * 50, "سؤال (question)"])
def test_labels_with_spaces_and_odd_characters_are_added_and_removed(writer, fake_github, label):
    writer.add_labels(REPO, 1, [label])
    assert label in fake_github.issue_labels(REPO, 1)

    writer.remove_label(REPO, 1, label)

    assert fake_github.issue_labels(REPO, 1) == ["bug"]
    (delete,) = fake_github.calls("DELETE", rf"/repos/{REPO}/issues/1/labels/.+")
    assert delete.path.endswith("/labels/" + label)
    assert "/" not in delete.raw_path.rsplit("/labels/", 1)[1]  # one path segment, even for "area/api"


def test_removing_a_label_the_issue_lacks_is_permanent(writer):
    with pytest.raises(PermanentGitHubError) as caught:
        writer.remove_label(REPO, 1, "enhancement")
    assert caught.value.status == 404 and "Label does not exist" in str(caught.value)


def test_removing_a_label_from_an_issue_that_is_not_there_says_not_found_as_github_does(writer, fake_github):
    with pytest.raises(PermanentGitHubError) as caught:
        writer.remove_label(REPO, 999, "bug")
    assert caught.value.status == 404 and "Not Found" in str(caught.value)
    assert fake_github.calls("DELETE", rf"/repos/{REPO}/issues/999/labels/bug")[0].status == 404


def test_create_label_and_comment_reach_github(writer, fake_github):
    writer.create_label(REPO, "kind/question", "d876e3", "Further information is requested")
    writer.create_comment(REPO, 1, "Labelled <!-- issue-sorter -->")

    (post,) = fake_github.calls("POST", rf"/repos/{REPO}/labels")
    assert post.json == {"name": "kind/question", "color": "d876e3",
                         "description": "Further information is requested"}
    assert fake_github.comments(REPO, 1) == ["Labelled <!-- issue-sorter -->"]


def test_creating_an_existing_label_is_permanent_422(writer):
    with pytest.raises(PermanentGitHubError) as caught:
        writer.create_label(REPO, "BUG", "d73a4a", "")
    assert caught.value.status == 422


# --- reads -----------------------------------------------------------------------------------------

def test_get_issue_maps_fields(writer):
    assert writer.get_issue(REPO, 1) == IssueSnapshot(
        number=1, title="Crash on start", body="Traceback ...", state="open", labels=("bug",),
        is_pull_request=False, author_login="alice", created_at=CREATED, updated_at=CREATED)


def test_get_issue_flags_a_pull_request_and_reads_a_missing_body_as_empty(writer):
    pull = writer.get_issue(REPO, 2)
    assert (pull.is_pull_request, pull.body, pull.state, pull.author_login) == (True, "", "closed", "bob")


def test_list_labels_follows_pagination(writer, fake_github):
    for n in range(147):
        fake_github.add_issue(REPO, 100 + n, "t", "", labels=[f"label-{n:03}"])

    names = writer.list_labels(REPO)

    assert names == ["bug", "enhancement", ODD_LABEL] + [f"label-{n:03}" for n in range(147)]
    pages = fake_github.calls("GET", rf"/repos/{REPO}/labels")
    assert [(p.query.get("per_page"), p.query.get("page")) for p in pages] == [("100", None), ("100", "2")]


def test_list_issues_page_returns_one_page_oldest_first_with_pull_requests_flagged(writer, fake_github):
    for number, day in [(5, 9), (3, 4), (4, 6)]:  # added out of order; created_at decides
        fake_github.add_issue(REPO, number, f"issue {number}", "",
                              created_at=CREATED + datetime.timedelta(days=day))

    pages = [writer.list_issues_page(REPO, page, per_page=2) for page in (1, 2, 3, 4)]

    assert [[i.number for i in page] for page in pages] == [[1, 2], [3, 4], [5], []]
    assert pages[0][1].is_pull_request and not pages[0][0].is_pull_request
    first = fake_github.calls("GET", rf"/repos/{REPO}/issues")[0]
    assert first.query == {"state": "all", "sort": "created", "direction": "asc", "per_page": "2",
                           "page": "1"}


@pytest.mark.parametrize("login, role", [("ada", "admin"), ("max", "maintain"), ("wri", "write"),
                                         ("tri", "triage"), ("rea", "read"), ("stranger", "none")])
def test_get_permission_returns_the_role_name(writer, login, role):
    assert writer.get_permission(REPO, login) == role


def test_get_permission_of_an_unknown_user_is_none(writer, fake_github):
    fake_github.fail_next("GET", rf"/repos/{REPO}/collaborators/ghost/permission", 404)
    assert writer.get_permission(REPO, "ghost") == "none"


def test_get_file_returns_the_bytes_and_git_blob_sha_of_a_file_and_none_for_a_missing_one(writer):
    file = writer.get_file(REPO, ".github/issue-sorter.yml")
    raw = "threshold: 0.7\nnote: café\n".encode()
    git_sha = "10ad3838cfe03918334611f4a09e1ad933820ee0"  # what `git hash-object --stdin` answers for `raw`
    assert (file.content, file.size, file.sha) == (raw, len(raw), git_sha)
    assert writer.get_file(REPO, ".github/absent.yml") is None


def test_get_file_over_one_megabyte_has_a_size_and_sha_but_no_content(writer, fake_github):
    """GitHub's Contents API sends no content above 1 MB (encoding "none"); the file is not mistaken for
    a missing one, which would send the bot on to the organisation's config."""
    fake_github.add_repo(REPO, files={"big.yml": "#" * (1024 * 1024 + 1)}, installation_id=INSTALLATION_ID)
    file = writer.get_file(REPO, "big.yml")
    assert (file.content, file.size, len(file.sha)) == (None, 1024 * 1024 + 1, 40)


# --- failures ----------------------------------------------------------------------------------------

def test_server_error_is_transient_and_not_retried_by_pygithub(writer, fake_github):
    fake_github.fail_next("GET", rf"/repos/{REPO}/issues/1", 502)

    with pytest.raises(TransientGitHubError) as caught:
        writer.get_issue(REPO, 1)

    assert (caught.value.status, caught.value.retry_after) == (502, None)
    assert len(fake_github.calls("GET", rf"/repos/{REPO}/issues/1")) == 1  # one answer, no retry


def test_primary_rate_limit_is_transient_with_retry_after_until_reset_and_no_sleep(writer, fake_github):
    """PyGithub's default GithubRetry would sleep here until the reset; ours must raise at once."""
    reset = int(time.time()) + 120
    fake_github.fail_next("POST", rf"/repos/{REPO}/issues/1/labels", 403,
                          headers={"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": str(reset)})
    started = time.monotonic()

    with pytest.raises(TransientGitHubError) as caught:
        writer.add_labels(REPO, 1, ["enhancement"])

    assert time.monotonic() - started < 5
    assert caught.value.status == 403
    assert caught.value.retry_after == pytest.approx(120, abs=3)
    assert len(fake_github.calls("POST", rf"/repos/{REPO}/issues/1/labels")) == 1


@pytest.mark.parametrize("status, headers, expected_wait", [
    (429, {"Retry-After": "30"}, 30),
    (403, {"Retry-After": "45"}, 45),
    (403, {}, 60),  # secondary limit named only in the message: GitHub says wait a minute
])
def test_secondary_rate_limit_is_transient(writer, fake_github, status, headers, expected_wait):
    body = None if headers else {"message": "You have exceeded a secondary rate limit. Please wait a few "
                                            "minutes before you try again."}
    fake_github.fail_next("POST", rf"/repos/{REPO}/issues/1/comments", status, headers=headers, body=body)

    with pytest.raises(TransientGitHubError) as caught:
        writer.create_comment(REPO, 1, "hello")

    assert caught.value.retry_after == pytest.approx(expected_wait, abs=1)


def test_missing_permission_403_is_permanent(writer, fake_github):
    fake_github.fail_next("POST", rf"/repos/{REPO}/issues/1/labels", 403)

    with pytest.raises(PermanentGitHubError) as caught:
        writer.add_labels(REPO, 1, ["enhancement"])

    assert caught.value.status == 403
    assert "Resource not accessible by integration" in str(caught.value)


@pytest.mark.parametrize("status", [404, 410, 422])
def test_client_errors_are_permanent(writer, fake_github, status):
    fake_github.fail_next("GET", rf"/repos/{REPO}/issues/1", status)

    with pytest.raises(PermanentGitHubError) as caught:
        writer.get_issue(REPO, 1)

    assert caught.value.status == status


def test_a_token_github_refuses_early_is_renewed_once_and_the_call_tried_again(writer, fake_github):
    """PyGithub renews a token only by its own clock; GitHub may refuse it before (clock skew, revoked)."""
    writer.get_issue(REPO, 1)
    fake_github.expire_tokens()

    writer.add_labels(REPO, 1, ["enhancement"])

    assert fake_github.issue_labels(REPO, 1) == ["bug", "enhancement"]
    assert len(token_posts(fake_github)) == 2
    assert [p.status for p in fake_github.calls("POST", rf"/repos/{REPO}/issues/1/labels")] == [401, 200]


def test_a_401_after_renewal_is_permanent_after_one_renewal(writer, fake_github):
    fake_github.fail_next("GET", rf"/repos/{REPO}/issues/1", 401, times=5)

    with pytest.raises(PermanentGitHubError) as caught:
        writer.get_issue(REPO, 1)

    assert caught.value.status == 401
    # the first token, one renewal, two tries: no more
    assert len(fake_github.calls("GET", rf"/repos/{REPO}/issues/1")) == 2
    assert len(token_posts(fake_github)) == 2


def test_a_transferred_issue_is_permanent_301_naming_where_it_went(writer, fake_github):
    fake_github.add_repo("octo-org/elsewhere", installation_id=INSTALLATION_ID)
    fake_github.transfer_issue(REPO, 1, "octo-org/elsewhere", 9)

    with pytest.raises(PermanentGitHubError) as caught:
        writer.get_issue(REPO, 1)

    assert caught.value.status == 301 and str(caught.value) == "transferred to octo-org/elsewhere#9"
    assert [r.status for r in fake_github.requests if "/issues/" in r.path] == [301, 200]  # PyGithub follows


def test_token_refusal_for_a_removed_installation_is_permanent(app, fake_github):
    with pytest.raises(PermanentGitHubError) as caught:
        app.writer_for(12345).get_issue(REPO, 1)
    assert caught.value.status == 404


def test_an_installation_deleted_while_its_token_is_held_is_permanent_not_retried(writer, fake_github):
    writer.get_issue(REPO, 1)  # the token is fetched and cached
    fake_github.set_installation(INSTALLATION_ID, deleted=True)  # the App uninstalled mid-job

    with pytest.raises(PermanentGitHubError) as caught:
        writer.get_issue(REPO, 1)

    assert caught.value.status == 404  # the token refused (401), its renewal refused: the installation is gone
    assert [r.status for r in fake_github.calls("GET", rf"/repos/{REPO}/issues/1")] == [200, 401]
    assert [r.status for r in token_posts(fake_github)] == [201, 404]


def test_connection_refused_is_transient(app_key):
    with FakeGitHub(APP_ID, app_key[1]) as fake:
        url = fake.url  # a port that was just free and now has nobody listening
    writer = GitHubApp(APP_ID, app_key[0], url, write_interval=0, timeout=2).writer_for(INSTALLATION_ID)

    with pytest.raises(TransientGitHubError) as caught:
        writer.get_issue(REPO, 1)
    assert caught.value.status is None


# --- the fake keeps GitHub's shapes ----------------------------------------------------------------

def recorded(path: str, index: int):
    return json.loads((API_RECORDINGS / path).read_text())[index]["response"]


SHAPES = [  # (what, method, path, body, recording, index, nested keys to compare as well)
    ("access token", "POST", f"/app/installations/{INSTALLATION_ID}/access_tokens", {"permissions": {}},
     "pygithub-replay/GithubIntegration.testGetAccessToken.json", 0, ()),
    ("repo installation", "GET", f"/repos/{REPO}/installation", None,
     "pygithub-replay/GithubIntegration.testGetRepoInstallation.json", 0, ("account",)),
    ("repository", "GET", f"/repos/{REPO}", None,
     "octokit-fixtures/get-repository/normalized-fixture.json", 0, ("owner", "permissions")),
    ("labels", "GET", f"/repos/{REPO}/labels", None,
     "octokit-fixtures/labels/normalized-fixture.json", 0, ()),
    ("create label", "POST", f"/repos/{REPO}/labels", {"name": "new", "color": "663399"},
     "octokit-fixtures/labels/normalized-fixture.json", 1, ()),
    ("add labels", "POST", f"/repos/{REPO}/issues/1/labels", ["Foo", "bAr"],
     "octokit-fixtures/add-labels-to-issue/normalized-fixture.json", 1, ()),
    ("issue", "GET", f"/repos/{REPO}/issues/1", None, "pygithub-replay/IssueComment.setUp.json", 1,
     ("labels", "reactions")),
    ("issues", "GET", f"/repos/{REPO}/issues?state=all&direction=asc&per_page=1", None,
     "octokit-fixtures/paginate-issues/normalized-fixture.json", 0, ("user", "reactions")),
    ("comment", "POST", f"/repos/{REPO}/issues/1/comments", {"body": "hi"},
     "pygithub-replay/IssueComment.setUp.json", 2, ("reactions",)),
    ("not found", "POST", "/app/installations/999/access_tokens", {"permissions": {}},
     "pygithub-replay/GithubIntegration.testGetAccessTokenForNoInstallation.json", 0, ()),
    ("validation failed", "POST", f"/repos/{REPO}/labels", {"name": "bug", "color": "zz"},
     "octokit-fixtures/errors/normalized-fixture.json", 0, ("errors",)),
]


def keys(value) -> set[str]:
    return set(value[0] if isinstance(value, list) else value)


def raw_credentials(fake: FakeGitHub, private_key: str) -> tuple[str, str]:
    """(App JWT, installation token) for plain `requests` calls, obtained the way GitHub hands them out."""
    app_jwt = Auth.AppAuth(APP_ID, private_key).token
    response = requests.post(f"{fake.url}/app/installations/{INSTALLATION_ID}/access_tokens",
                             headers={"Authorization": f"Bearer {app_jwt}"}, json={"permissions": {}})
    return app_jwt, response.json()["token"]


@pytest.mark.parametrize("what, method, path, body, recording, index, nested", SHAPES,
                         ids=[shape[0] for shape in SHAPES])
def test_fake_responses_have_the_keys_of_recorded_github_responses(
        fake_github, app_key, what, method, path, body, recording, index, nested):
    app_jwt, token = raw_credentials(fake_github, app_key[0])
    as_app = path.startswith("/app/") or path.endswith("/installation")
    headers = {"Authorization": f"Bearer {app_jwt}" if as_app else f"token {token}"}

    ours = requests.request(method, fake_github.url + path, json=body, headers=headers).json()
    github = recorded(recording, index)

    assert keys(ours) == keys(github)
    for key in nested:
        first_ours = ours[0] if isinstance(ours, list) else ours
        first_github = github[0] if isinstance(github, list) else github
        assert keys(first_ours[key]) == keys(first_github[key]), key


def test_fake_paginates_with_githubs_link_header(fake_github, app_key):
    """Same rels in the same order as GitHub's paginate-issues recording: prev, next, last, first."""
    for number in range(3, 12):
        fake_github.add_issue(REPO, number, "t", "")
    pages = json.loads((API_RECORDINGS / "octokit-fixtures/paginate-issues/normalized-fixture.json")
                       .read_text())
    _, token = raw_credentials(fake_github, app_key[0])

    def rels(link: str) -> list[str]:
        return [part.split('rel="')[1].rstrip('"') for part in link.split(", ")]

    ours = [rels(requests.get(f"{fake_github.url}/repos/{REPO}/issues",
                              headers={"Authorization": f"token {token}"},
                              params={"state": "all", "per_page": 3, "page": page}).headers["Link"])
            for page in range(1, 5)]
    github = [rels(page["headers"]["link"]) for page in pages]
    assert ours == [github[0], github[1], github[2], github[4]]


def test_fake_refuses_a_jwt_signed_with_another_key_and_a_request_without_token(fake_github):
    stranger_jwt = Auth.AppAuth(APP_ID, generate_app_keypair()[0]).token
    refused = requests.post(f"{fake_github.url}/app/installations/{INSTALLATION_ID}/access_tokens",
                            headers={"Authorization": f"Bearer {stranger_jwt}"})
    anonymous = requests.get(f"{fake_github.url}/repos/{REPO}/issues/1")

    assert (refused.status_code, anonymous.status_code) == (401, 401)
    assert anonymous.json()["message"] == "Bad credentials"


def test_a_reaction_on_a_comment_is_one_post_with_githubs_answer(writer, fake_github):
    writer.react_to_comment(REPO, 4242, "-1")
    writer.react_to_comment(REPO, 4242, "-1")  # GitHub answers 200 with the same reaction, and keeps one
    (first, second) = fake_github.calls("POST", rf"/repos/{REPO}/issues/comments/4242/reactions")
    assert (first.status, second.status) == (201, 200)
    assert fake_github.reactions(REPO, 4242) == ["-1"]
    with pytest.raises(PermanentGitHubError) as refused:
        writer.react_to_comment(REPO, 4242, "shrug")  # not one of GitHub's eight contents
    assert refused.value.status == 422
