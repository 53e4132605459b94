"""The review page in a real browser: headless Chromium (Debian's chromium + chromium-driver) driven by
Selenium, against the app served on loopback and the fake GitHub's OAuth endpoints.

Set REVIEW_SCREENSHOTS=docs/review to keep a screenshot of each page (README.md shows them).
"""

from __future__ import annotations

import os
import shutil
import threading
from pathlib import Path

import pytest
from sqlalchemy import select
from werkzeug.serving import make_server

from core.db import session_scope
from core.tables import IssueRecord, LabelEvent, Prediction
from tests.bot.conftest import REPO, run_worker
from tests.bot.review.conftest import XSS_TITLE, seed
from tests.conftest import IN_CI

pytestmark = pytest.mark.browser
SCREENSHOTS = os.environ.get("REVIEW_SCREENSHOTS")
TITLE = "Crash when the config file is empty"


@pytest.fixture(scope="module")
def browser():
    chromium, driver = shutil.which("chromium"), shutil.which("chromedriver")
    if not (chromium and driver):
        message = "chromium and chromedriver are not installed (apt-get install chromium chromium-driver)"
        if IN_CI:
            pytest.fail(message + "; CI must provide them")
        pytest.skip(message)
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = chromium  # Debian's browser: Selenium Manager must not fetch one
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1200,820"):
        options.add_argument(argument)
    chrome = webdriver.Chrome(service=Service(driver), options=options)
    chrome.implicitly_wait(5)
    yield chrome
    chrome.quit()


@pytest.fixture
def served(review_app):
    """The real app on a loopback port, as gunicorn would serve it (threads, real HTTP)."""
    server = make_server("127.0.0.1", 0, review_app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()
    server.server_close()
    thread.join()


@pytest.fixture
def signed_out(browser):
    browser.delete_all_cookies()
    return browser


def screenshot(browser, name: str) -> None:
    if SCREENSHOTS:
        Path(SCREENSHOTS).mkdir(parents=True, exist_ok=True)
        browser.save_screenshot(str(Path(SCREENSHOTS) / f"{name}.png"))


def wait_for_url(browser, url: str) -> None:
    """A click's navigation ends after click() returns: wait until the browser is at `url`'s path."""
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(browser, 10).until(lambda driver: driver.current_url.split("?")[0].endswith(url))


def sign_in(browser, url: str, fake, login: str) -> None:
    fake.sign_in_as(login)
    browser.get(f"{url}/review/")
    assert "/review/sign-in" in browser.current_url
    screenshot(browser, "sign-in")
    browser.find_element("id", "sign-in").click()  # to the fake github.com, which approves and sends us back
    wait_for_url(browser, f"{url}/review/")
    assert browser.find_element("css selector", "header .who").text.startswith(login)


def decided(sessions, fake, number: int, title: str, *, label: str, by: str) -> None:
    """A prediction a maintainer already corrected on GitHub, for the page to show."""
    row = seed(sessions, fake, number, title, outcome="applied", label="enhancement",
               scores={"feature": 0.55, "bug": 0.3, "question": 0.15},
               reason="'feature' is 'enhancement' in this repository")
    with session_scope(sessions) as session:
        prediction = session.get(Prediction, row.prediction_id)
        issue = session.get(IssueRecord, prediction.issue_id)
        prediction.decision, issue.confirmed_label, issue.confirmed_by = "corrected", label, by
        session.add_all([LabelEvent(issue_id=issue.id, action=action, label=name, actor_login=by)
                         for action, name in (("unlabeled", "enhancement"), ("labeled", label))])


def test_a_triager_signs_in_accepts_a_suggestion_and_sees_it_done(signed_out, served, review_github, sessions,
                                                                  bare_context, redis):
    browser = signed_out
    decided(sessions, review_github, 5, "Segfault on start-up", label="bug", by="maintainer")
    seed(sessions, review_github, 6, "How do I configure the proxy?", outcome="abstained", label=None,
         scores={"question": 0.41, "docs": 0.33, "bug": 0.26},
         reason="top score 0.41 (question) is below 0.50")
    xss = seed(sessions, review_github, 7, XSS_TITLE, outcome="suggested", label="bug")
    suggestion = seed(sessions, review_github, 8, TITLE, outcome="suggested", label="bug",
                      scores={"bug": 0.82, "feature": 0.1, "question": 0.08})

    sign_in(browser, served, review_github, "helper")
    screenshot(browser, "repositories")
    browser.find_element("link text", REPO).click()
    row = browser.find_element("id", f"prediction-{suggestion.prediction_id}")
    assert TITLE in row.find_element("class name", "title").text
    title = browser.find_element("css selector", f"#prediction-{xss.prediction_id} .title")
    assert title.text == f"#7 {XSS_TITLE}"  # shown as text; a script would have opened an alert
    assert browser.execute_script("return document.querySelectorAll('td script').length") == 0
    screenshot(browser, "repository-waiting")

    row.find_element("css selector", "button[value=accept]").click()
    assert browser.find_element("class name", "flash").text == "Queued: accept 'bug' on #8."
    row = browser.find_element("id", f"prediction-{suggestion.prediction_id}")
    assert "queued" in row.find_element("class name", "review").text
    assert review_github.issue_labels(REPO, 8) == []
    screenshot(browser, "repository-queued")

    run_worker(redis)
    browser.get(f"{served}/review/{REPO}?filter=all")
    row = browser.find_element("id", f"prediction-{suggestion.prediction_id}")
    assert "accepted" in row.find_element("class name", "since").text
    assert "helper added bug" in row.find_element("class name", "since").text
    screenshot(browser, "repository-all")
    assert review_github.issue_labels(REPO, 8) == ["bug"]
    browser.find_element("partial link text", "Quality, models and preview").click()
    images = browser.find_elements("css selector", "main img")
    assert len(images) == 3 and all(browser.execute_script("return arguments[0].naturalWidth", image) > 100
                                    for image in images)  # the charts really drew
    screenshot(browser, "quality")
    with session_scope(sessions) as session:
        prediction = session.get(Prediction, suggestion.prediction_id)
        issue = session.get(IssueRecord, prediction.issue_id)
        assert (prediction.decision, issue.confirmed_label, issue.confirmed_by) == \
            ("accepted", "bug", "helper")
        actors = session.scalars(select(LabelEvent.actor_login).where(LabelEvent.issue_id == issue.id)).all()
        assert actors == ["helper"]

    browser.find_element("css selector", "header .who button").click()  # sign out
    wait_for_url(browser, "/review/sign-in")
    browser.get(f"{served}/review/{REPO}?filter=all")
    assert "/review/sign-in" in browser.current_url and TITLE not in browser.page_source


@pytest.mark.parametrize("login", ["reader", "outsider"])
def test_a_reader_and_an_outsider_see_no_repository_and_no_title(signed_out, served, review_github, sessions,
                                                                 login):
    seed(sessions, review_github, 8, TITLE, outcome="suggested", label="bug")
    sign_in(signed_out, served, review_github, login)
    assert REPO not in signed_out.page_source
    signed_out.get(f"{served}/review/{REPO}?filter=all")
    assert "Not Found" in signed_out.page_source and TITLE not in signed_out.page_source


def test_an_instance_admin_sees_the_operator_page(signed_out, served, review_github, sessions):
    browser = signed_out
    sign_in(browser, served, review_github, "boss")
    browser.get(f"{served}/review/operator")
    headings = [element.text for element in browser.find_elements("css selector", "main h2")]
    assert headings == ["Queues", "Failed jobs", "Workers", "Models serving", "Last training runs"]
    screenshot(browser, "operator")


def test_in_shadow_mode_a_maintainers_accept_and_relabel_are_measured(signed_out, served, review_github,
                                                                      sessions, bare_context, redis):
    """Issue 27.1 in the browser: the page says the repository is in shadow mode and what Accept does; an
    accept and a relabel become verdicts that the Corrected tab and the quality page count."""
    browser = signed_out
    kept = seed(sessions, review_github, 11, "Crash on save", outcome="shadow", label="bug")
    wrong = seed(sessions, review_github, 12, "Crash on load", outcome="shadow", label="bug")
    sign_in(browser, served, review_github, "maintainer")
    browser.get(f"{served}/review/{REPO}")
    assert "Accept writes that label on the issue" in browser.find_element("id", "shadow-mode").text
    browser.find_element("css selector", f"#prediction-{kept.prediction_id} button[value=accept]").click()
    row = browser.find_element("id", f"prediction-{wrong.prediction_id}")
    from selenium.webdriver.support.ui import Select

    Select(row.find_element("css selector", "select[name=label]")).select_by_visible_text("question")
    row.find_element("css selector", "button[value=relabel]").click()
    run_worker(redis)
    browser.get(f"{served}/review/{REPO}?filter=corrected")
    rows = browser.find_elements("css selector", "#decisions tbody tr")
    assert [r.get_attribute("id") for r in rows] == [f"prediction-{wrong.prediction_id}"]
    browser.get(f"{served}/review/{REPO}/quality")
    assert "would-have-been precision" in browser.find_element("id", "shadow-mode").text
    assert browser.find_element("css selector", "#weeks tbody td.precision").text.startswith("50 % of 2")
    assert "(too few)" in browser.find_element("css selector", "#weeks tbody td.precision").text


def test_an_error_page_is_the_sites_own_with_a_way_back(signed_out, served, review_github, sessions):
    """Issue 27.2: an unknown repository, a bad filter, the operator page for a non-admin showed raw JSON."""
    browser = signed_out
    seed(sessions, review_github, 8, TITLE, outcome="suggested", label="bug")
    sign_in(browser, served, review_github, "maintainer")
    for path in ("/review/nobody/nothing", "/review/operator"):
        browser.get(f"{served}{path}")
        assert browser.find_element("css selector", "main h1").text == "Not Found"
        assert '"error"' not in browser.page_source
    browser.get(f"{served}/review/{REPO}?filter=bogus")
    assert "There is no filter 'bogus'" in browser.find_element("id", "error-message").text
    browser.find_element("link text", f"← {REPO}").click()
    wait_for_url(browser, f"/review/{REPO}")
    assert TITLE in browser.page_source


def test_retrain_now_queues_once_and_shows_the_refusal_and_its_reason(signed_out, served, review_github,
                                                                      sessions, redis, review_settings):
    """Issues 27.3 and 27.4: three clicks queued three jobs and a refused run left no trace; the page named
    no figure of its models."""
    from core.tables import GLOBAL_SCOPE, ModelPromotion, ModelVersion
    from trainer import context as training_context
    from trainer.worker import build_context

    browser = signed_out
    seed(sessions, review_github, 8, TITLE, outcome="applied", label="bug")
    with session_scope(sessions) as session:
        version = ModelVersion(version="global-v2", scope=GLOBAL_SCOPE, path="unused", labels=["bug"],
                               metrics={"macro_f1": 0.605, "mean_repo_macro_f1": 0.806})
        session.add(version)
        session.flush()
        session.add(ModelPromotion(scope=GLOBAL_SCOPE, model_version_id=version.id, reason="test"))
    sign_in(browser, served, review_github, "maintainer")
    browser.get(f"{served}/review/{REPO}/quality")
    assert browser.find_element("css selector", "#models td.macro-f1").text == "0.605"
    assert browser.find_element("css selector", "#models td.mean-repo").text == "0.806"
    browser.find_element("xpath", "//button[text()='Retrain now']").click()
    assert browser.find_element("class name", "flash").text.startswith("Queued: retrain.")
    assert browser.find_element("css selector", "#job-retrain .tag").text == "queued"
    assert not browser.find_element("xpath", "//button[text()='Retrain now']").is_enabled()
    training_context.configure(build_context(review_settings, redis=redis))
    try:
        run_worker(redis, queues=("training",))
    finally:
        training_context.configure(None)
    browser.get(f"{served}/review/{REPO}/quality")
    assert browser.find_element("css selector", "#job-retrain .tag").text == "refused"
    detail = browser.find_element("css selector", "#job-retrain .detail").text
    assert "not enough confirmed issues" in detail
    browser.find_element("xpath", "//button[text()='Retrain now']").click()  # within the hour: refused, said
    assert "was queued less than 60 minutes ago" in browser.find_element("class name", "flash").text
    screenshot(browser, "quality-jobs")
