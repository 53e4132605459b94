"""The review page in a real browser: headless Chromium (Debian's chromium + chromium-driver) driven by
Selenium, against the app served on loopback and the fake GitHub's OAuth endpoints.

Set REVIEW_SCREENSHOTS=docs/review to keep a screenshot of each page (README.md shows them).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import threading
from pathlib import Path

import pytest
from sqlalchemy import select
from werkzeug.serving import make_server

from core import store
from core.db import session_scope
from core.tables import GLOBAL_SCOPE, IssueRecord, LabelEvent, ModelVersion, Prediction
from tests.bot.conftest import REPO, run_worker
from tests.bot.review.conftest import XSS_TITLE, seed, seed_own_labels
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
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1280,820"):
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
    """The page as shown, in 256 colours (a few tens of kB for the README, not hundreds)."""
    if SCREENSHOTS:
        from PIL import Image

        Path(SCREENSHOTS).mkdir(parents=True, exist_ok=True)
        path = Path(SCREENSHOTS) / f"{name}.png"
        browser.save_screenshot(str(path))
        with Image.open(path) as image:
            small = image.convert("RGB").quantize(256)
        small.save(path, optimize=True)


def wait_for_url(browser, url: str) -> None:
    """A click's navigation ends after click() returns: wait until the browser is at `url`'s path."""
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(browser, 10).until(lambda driver: driver.current_url.split("?")[0].endswith(url))


def flashed(browser) -> str:
    """The flashed message of the page a click's form post redirects to: the post, its redirect and the page
    end after click() returns, so wait for it (longer than the implicit wait, on a busy CI machine)."""
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(browser, 15).until(lambda driver: driver.find_elements("class name", "flash"))[0].text


def queued(browser, prediction_id: int) -> None:
    """A click posts without reloading: wait until its row says queued (the job is in Redis then)."""
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(browser, 10).until(lambda driver: driver.find_elements(
        "css selector", f"#prediction-{prediction_id} td.review .tag.queued"))


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
    queued(browser, suggestion.prediction_id)
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
    """In the browser: the page says the repository is in shadow mode and what Accept does; an
    accept and a relabel become verdicts that the Corrected tab and the quality page count."""
    browser = signed_out
    kept = seed(sessions, review_github, 11, "Crash on save", outcome="shadow", label="bug")
    wrong = seed(sessions, review_github, 12, "Crash on load", outcome="shadow", label="bug")
    sign_in(browser, served, review_github, "maintainer")
    browser.get(f"{served}/review/{REPO}")
    assert "Accept writes that label on the issue" in browser.find_element("id", "shadow-mode").text
    browser.find_element("css selector", f"#prediction-{kept.prediction_id} button[value=accept]").click()
    queued(browser, kept.prediction_id)
    row = browser.find_element("id", f"prediction-{wrong.prediction_id}")
    from selenium.webdriver.support.ui import Select

    Select(row.find_element("css selector", "select[name=label]")).select_by_visible_text("question")
    row.find_element("css selector", "button[value=relabel]").click()
    queued(browser, wrong.prediction_id)
    run_worker(redis)
    browser.get(f"{served}/review/{REPO}?filter=corrected")
    rows = browser.find_elements("css selector", "#decisions > tbody > tr")
    assert [r.get_attribute("id") for r in rows] == [f"prediction-{wrong.prediction_id}"]
    browser.get(f"{served}/review/{REPO}/quality")
    assert "would-have-been precision" in browser.find_element("id", "shadow-mode").text
    assert browser.find_element("css selector", "#weeks tbody td.precision").text.startswith("50 % of 2")
    assert "(too few)" in browser.find_element("css selector", "#weeks tbody td.precision").text


def test_an_error_page_is_the_sites_own_with_a_way_back(signed_out, served, review_github, sessions):
    """An unknown repository, a bad filter, the operator page for a non-admin once showed raw JSON."""
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
    """Before, three clicks queued three jobs and a refused run left no trace; the page named
    no figure of its models."""
    from core.tables import ModelPromotion
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
    assert flashed(browser).startswith("Queued: retrain.")
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
    assert "was queued less than 60 minutes ago" in flashed(browser)
    screenshot(browser, "quality-jobs")


@contextlib.contextmanager
def screen(browser, width: int, height: int = 820):
    """The page laid out for a screen `width` CSS pixels wide (a phone: 400), then back to the default."""
    browser.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                            {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": width < 700})
    try:
        yield
    finally:
        browser.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})


def confirmed(sessions, number: int, title: str, label: str) -> None:
    """A confirmed issue of the repository's history: one the memory's vote can name."""
    with session_scope(sessions) as session:
        repository = store.ensure_repository(session, REPO, 1)
        issue, _ = store.upsert_issue(session, repository, number, title=title, body="", author_login="someone",
                                      state="closed")
        issue.confirmed_label, issue.confirmed_by = label, "maintainer"


def with_why(sessions, review_github, number: int, title: str, **extra):
    """A suggestion with all of its why-this-label: both scores, two voters, the threshold, the model."""
    with session_scope(sessions) as session:
        version = ModelVersion(version="global-v3", scope=GLOBAL_SCOPE, path="unused",
                               labels=["bug", "feature", "question"], metrics={})
        session.add(version)
        session.flush()
        version_id = version.id
    confirmed(sessions, 40, "Settings page takes a minute to open", "enhancement")
    confirmed(sessions, 41, "Settings crash on save", "bug")
    return seed(sessions, review_github, number, title, outcome="suggested", label="enhancement",
                scores={"feature": 0.62, "bug": 0.25, "question": 0.13},
                model_scores={"feature": 0.41, "bug": 0.44, "question": 0.15},
                neighbours=[{"number": 40, "similarity": 0.91, "label": "feature"},
                            {"number": 41, "similarity": 0.47, "label": "bug"}],
                threshold=0.5, model_version_id=version_id,
                reason="'feature' is 'enhancement' in this repository",
                body="When I open the settings the page stays blank for a minute. " * 8, **extra)


def test_why_this_label_shows_both_scores_the_voters_the_model_and_the_issue(signed_out, served,
                                                                            review_github, sessions):
    """Before, the page showed the served scores only, in the model's class names; the memory's voters
    were dropped, and the model version and the author never shown."""
    browser = signed_out
    row = with_why(sessions, review_github, 9, "Settings open slowly")
    sign_in(browser, served, review_github, "helper")
    browser.get(f"{served}/review/{REPO}")
    line = browser.find_element("css selector", f"#prediction-{row.prediction_id} .scores").text
    assert line.startswith("enhancement 0.62 · bug 0.25")  # the repository's own label names
    panel = browser.find_element("id", f"why-{row.prediction_id}")
    panel.find_element("tag name", "summary").click()
    scores = [[cell.text for cell in tr.find_elements("tag name", "td")]
              for tr in panel.find_elements("css selector", "table.why-scores tbody tr")]
    assert scores == [["enhancement", "0.41", "0.62"], ["bug", "0.44", "0.25"], ["question", "0.15", "0.13"]]
    voters = panel.find_elements("css selector", ".voters li")
    assert [voter.text for voter in voters] == [
        "#40 Settings page takes a minute to open enhancement, similarity 0.91",
        "#41 Settings crash on save bug, similarity 0.47"]
    link = voters[0].find_element("tag name", "a").get_attribute("href")
    assert link == f"{review_github.url}/{REPO}/issues/40"  # on GitHub
    assert "Model global-v3 · opened by octocat" in panel.text
    excerpt = panel.find_element("class name", "excerpt").text
    assert excerpt.startswith("When I open the settings") and excerpt.endswith("…") and len(excerpt) < 300
    assert "A label needs a top score of 0.50." in panel.text
    screenshot(browser, "repository-why")


def test_several_issues_are_accepted_at_once_without_leaving_the_page(signed_out, served, review_github,
                                                                     sessions, bare_context, redis):
    """Before, one issue at a time, each click a reload back at the top of the page."""
    browser = signed_out
    rows = [seed(sessions, review_github, 20 + i, f"Crash number {i}", outcome="suggested", label="bug",
                 scores={"bug": 0.56 + i / 10, "feature": 0.3 - i / 15, "question": 0.14 - i / 30},
                 threshold=0.5)
            for i in range(4)]
    sign_in(browser, served, review_github, "helper")
    browser.get(f"{served}/review/{REPO}")
    browser.execute_script("window.notReloaded = true")
    for row in rows[:3]:
        browser.find_element("css selector", f"#prediction-{row.prediction_id} input.select").click()
    assert browser.find_element("id", "selected-count").text == "3 selected"
    browser.execute_script("window.scrollTo(0, 0)")
    screenshot(browser, "repository-selected")
    browser.find_element("id", "accept-selected").click()
    for row in rows[:3]:
        queued(browser, row.prediction_id)
    assert browser.execute_script("return window.notReloaded") is True
    flashes = sorted(element.text for element in browser.find_elements("css selector", "#messages .flash"))
    assert flashes == [f"Queued: accept 'bug' on #{row.number}." for row in rows[:3]]
    assert browser.find_elements("css selector", f"#prediction-{rows[3].prediction_id} input.select")
    assert redis.llen("rq:queue:feedback") == 3
    run_worker(redis)
    assert [review_github.issue_labels(REPO, row.number) for row in rows] == [["bug"], ["bug"], ["bug"], []]
    from selenium.webdriver.support.ui import WebDriverWait

    # the page watches its queued rows: they say what happened, with no reload
    WebDriverWait(browser, 10).until(lambda driver: all(
        "decided" in driver.find_element("css selector", f"#prediction-{row.prediction_id} td.review").text
        for row in rows[:3]))
    assert browser.execute_script("return window.notReloaded") is True


def test_a_click_and_the_keyboard_keep_the_page_where_it_was(signed_out, served, review_github, sessions,
                                                             redis):
    """Before, after a click the page came back at its top; nothing could be done from the keyboard."""
    from selenium.webdriver.common.action_chains import ActionChains

    browser = signed_out
    rows = [seed(sessions, review_github, 30 + i, f"Issue number {i}", outcome="suggested", label="bug")
            for i in range(12)]  # newest first: rows[0] is at the bottom
    sign_in(browser, served, review_github, "helper")
    with screen(browser, 1280, 600):
        browser.get(f"{served}/review/{REPO}")
        browser.execute_script("window.notReloaded = true")
        button = browser.find_element("css selector",
                                      f"#prediction-{rows[0].prediction_id} button[value=accept]")
        browser.execute_script("arguments[0].scrollIntoView({block: 'center'})", button)
        before = browser.execute_script("return window.scrollY")
        assert before > 300
        button.click()
        queued(browser, rows[0].prediction_id)
        assert browser.execute_script("return window.scrollY") == before
        ActionChains(browser).send_keys("k").send_keys("a").perform()  # up one (rows[1]), accept it
        queued(browser, rows[1].prediction_id)
        ActionChains(browser).send_keys("k").send_keys("x").send_keys("k").send_keys("x").perform()
        ActionChains(browser).key_down("\ue008").send_keys("A").key_up("\ue008").perform()  # Shift+A
        queued(browser, rows[2].prediction_id)
        queued(browser, rows[3].prediction_id)
        assert redis.llen("rq:queue:feedback") == 4
        assert abs(browser.execute_script("return window.scrollY") - before) < 200  # no jump to the top
        assert browser.execute_script("return window.notReloaded") is True
        ActionChains(browser).send_keys("?").perform()
        shortcuts = browser.find_element("id", "shortcuts")
        assert shortcuts.get_attribute("open") is not None and "accept every selected issue" in shortcuts.text


def test_on_a_400_px_screen_the_list_is_cards_and_the_page_never_scrolls_sideways(signed_out, served,
                                                                                  review_github, sessions):
    """Before, under about 700 px the table overflowed the screen."""
    browser = signed_out
    row = with_why(sessions, review_github, 9,
                   "Settings_open_slowly_with_a_very_long_identifier_in_the_title")
    seed(sessions, review_github, 6, "How do I configure the proxy?", outcome="abstained", label=None,
         scores={"question": 0.41, "docs": 0.33, "bug": 0.26},
         reason="top score 0.41 (question) is below 0.50")
    sign_in(browser, served, review_github, "maintainer")
    with screen(browser, 400):
        assert browser.execute_script("return window.innerWidth") == 400
        browser.get(f"{served}/review/{REPO}")
        thead = browser.find_element("css selector", "#decisions > thead")
        assert browser.execute_script("return getComputedStyle(arguments[0]).display", thead) == "none"
        card = browser.find_element("id", f"prediction-{row.prediction_id}")
        assert card.rect["width"] <= 400
        card.find_element("css selector", "details.why summary").click()
        no_sideways = "return document.documentElement.scrollWidth <= window.innerWidth"
        assert browser.execute_script(no_sideways)
        browser.execute_script("window.scrollTo(0, 0)")
        screenshot(browser, "repository-400")
        for path in ("/review/", f"/review/{REPO}/quality", f"/review/{REPO}?filter=all&sort=confidence"):
            browser.get(f"{served}{path}")
            assert browser.execute_script(no_sideways), path
        browser.get(f"{served}/review/{REPO}/quality")
        images = browser.find_elements("css selector", "main img")
        assert images and all(image.rect["width"] <= 400 for image in images)  # the charts fit
        screenshot(browser, "quality-400")


def test_one_own_label_is_accepted_and_another_rejected_with_two_clicks_on_one_issue(
        signed_out, served, review_github, sessions, bare_context, redis):
    """On the page, each own label beside the kind has its own Accept and Reject; before, the first
    click hid every other form of the issue, and a second click on it was refused as "queued already"."""
    from selenium.webdriver.support.ui import WebDriverWait

    browser = signed_out
    row = seed_own_labels(sessions, review_github, 5, applied=("vision",), suggested=("streaming",))
    sign_in(browser, served, review_github, "helper")
    browser.get(f"{served}/review/{REPO}")
    browser.execute_script("window.notReloaded = true")
    own = f"#prediction-{row.prediction_id} .own-label"
    browser.find_element("css selector", f'{own}[data-own="streaming"] button[value=own-accept]').click()
    WebDriverWait(browser, 10).until(lambda driver: driver.find_elements(
        "css selector", f'{own}[data-own="streaming"] .tag.queued'))
    reject = browser.find_element("css selector", f'{own}[data-own="vision"] button[value=own-reject]')
    reject.click()  # the other own label is still there to click
    WebDriverWait(browser, 10).until(lambda driver: driver.find_elements(
        "css selector", f'{own}[data-own="vision"] .tag.queued'))
    flashes = [element.text for element in browser.find_elements("css selector", "#messages .flash")]
    assert flashes == ["Queued: reject 'vision' on #5."]
    kind = browser.find_element("css selector", f"#prediction-{row.prediction_id} .kind-review")
    assert kind.find_elements("css selector", "button[value=accept]")  # the kind is still to review
    assert redis.llen("rq:queue:feedback") == 2
    screenshot(browser, "repository-own-labels")

    run_worker(redis)
    # the page watches the row: both decisions appear without a reload
    WebDriverWait(browser, 10).until(lambda driver: not driver.find_elements(
        "css selector", f"#prediction-{row.prediction_id} .tag.queued"))
    assert browser.find_element("css selector", f'{own}[data-own="streaming"] .own-review').text == "accepted"
    assert browser.find_element("css selector", f'{own}[data-own="vision"] .own-review').text == "rejected"
    assert browser.execute_script("return window.notReloaded") is True
    assert review_github.issue_labels(REPO, 5) == ["streaming"]
    with session_scope(sessions) as session:
        decisions = {own.label: own.decision for own in session.get(Prediction, row.prediction_id).own_labels}
        events = [(e.action, e.label, e.actor_login) for e in session.scalars(select(LabelEvent)
                                                                                .order_by(LabelEvent.id))]
    assert decisions == {"streaming": "accepted", "vision": "rejected"}
    assert events == [("labeled", "streaming", "helper"), ("unlabeled", "vision", "helper")]
