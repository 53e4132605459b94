import pytest

from bot.intake import events


def test_issue_opened_is_parsed_from_githubs_example(payload):
    event = events.parse("issues", "d-1", payload("issues/opened"))
    assert isinstance(event, events.IssueEvent)
    assert (event.action, event.repo, event.number) == ("opened", "Codertocat/Hello-World", 1)
    assert event.snapshot.title == "Spelling error in the README file"
    assert event.snapshot.labels == ("bug",)
    assert event.installation_id is None  # the example was not sent to an App


def test_installation_id_is_read_when_github_sends_it(payload):
    body = payload("issues/opened")
    body["installation"] = {"id": 42, "node_id": "x"}
    assert events.parse("issues", "d-1", body).installation_id == 42


def test_empty_body_becomes_empty_text(payload):
    event = events.parse("issues", "d-2", payload("issues/opened.with-empty-body"))
    assert event.snapshot.body == ""


def test_huge_body_is_bounded_before_it_reaches_the_queue(payload):
    body = payload("issues/opened")
    body["issue"]["body"] = "x" * 5_000_000
    assert len(events.parse("issues", "d", body).snapshot.body) == events.MAX_JOB_BODY_CHARS


def test_labeled_event_carries_the_label_and_sender(payload):
    event = events.parse("issues", "d-3", payload("issues/labeled"))
    assert (event.action, event.label, event.sender_login, event.sender_is_bot) == (
        "labeled", "bug", "Codertocat", False)


def test_transferred_event_is_an_issue_event_of_the_old_home(payload):
    data = payload("issues/transferred")
    event = events.parse("issues", "d-4", data)
    assert (event.action, event.repo, event.number) == ("transferred", data["repository"]["full_name"],
                                                       data["issue"]["number"])


def test_comment_and_installation_events(payload):
    comment = events.parse("issue_comment", "d-5", payload("issue_comment/created.with-installation"))
    assert comment.installation_id == 1 and comment.commenter_login == "Codertocat"
    installed = events.parse("installation", "d-6", payload("installation/created"))
    assert installed.installation_id == 957387 and installed.repos == ("Codertocat/Hello-World",)
    added = events.parse("installation_repositories", "d-7", payload("installation_repositories/added"))
    assert added.repos


@pytest.mark.parametrize("action", ["created", "edited", "deleted"])
def test_label_events_name_the_repository_whose_labels_changed(payload, action):
    event = events.parse("label", f"d-{action}", payload(f"label/{action}"))
    assert (event.action, event.repo, event.label) == (action, "Codertocat/Hello-World", ":bug: Bugfix")


@pytest.mark.parametrize("name,event", [("pull_request/opened", "pull_request"),
                                        ("installation/new_permissions_accepted", "installation")])
def test_events_the_bot_does_not_handle_parse_to_none(payload, name, event):
    assert events.parse(event, "d", payload(name)) is None


def test_a_payload_missing_required_fields_is_malformed(payload):
    body = payload("issues/opened")
    del body["repository"]
    with pytest.raises(events.MalformedPayload, match="repository"):
        events.parse("issues", "d", body)


def test_job_kwargs_are_plain_data(payload):
    kwargs = events.parse("issues", "d", payload("issues/opened")).job_kwargs()
    assert kwargs["snapshot"]["labels"] == ["bug"] and isinstance(kwargs["snapshot"], dict)


@pytest.mark.parametrize("name", ["repository/renamed", "repository/transferred.with-installation",
                                  "repository/privatized", "repository/publicized"])
def test_repository_events_carry_githubs_id_and_visibility(payload, name):
    body = payload(name)
    event = events.parse("repository", "d", body)
    assert isinstance(event, events.RepositoryEvent)
    assert (event.repo, event.repo_id, event.private) == (body["repository"]["full_name"], body["repository"]["id"],
                                                          body["repository"]["private"])


def test_an_issue_event_carries_its_time_and_repository_id_and_a_transfer_its_new_place(payload):
    event = events.parse("issues", "d", payload("issues/transferred"), received_at="2026-12-01T10:00:00+00:00")
    assert (event.repo_id, event.repo_private, event.received_at) == (17273051, True, "2026-12-01T10:00:00+00:00")
    assert event.snapshot.updated_at.isoformat() == "2019-10-25T22:46:30+00:00"
    assert event.moved_to == {"repo": "Codertocat/Hello-World", "repo_id": 186853002, "private": False, "number": 1}


@pytest.mark.parametrize("event_name,name,action", [("installation", "installation/deleted", "deleted"),
                                                    ("installation", "installation/suspend", "suspend"),
                                                    ("installation", "installation/unsuspend", "unsuspend"),
                                                    ("installation_repositories", "installation_repositories/removed",
                                                     "removed")])
def test_installation_lifecycle_events_name_their_repositories_by_id(payload, event_name, name, action):
    event = events.parse(event_name, "d", payload(name))
    assert isinstance(event, events.InstallationEvent) and event.action == action
    assert all(r["repo_id"] and r["repo"] for r in event.repositories)
