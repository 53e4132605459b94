import pytest

from bot import events


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
                                        ("repository/renamed", "repository"),
                                        ("installation/deleted", "installation")])
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
