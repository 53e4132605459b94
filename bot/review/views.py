"""The review page's routes: sign in with GitHub, the reviewer's repositories, a repository's decisions.

Every page but the sign-in ones needs a signed-in reviewer (else: a redirect to sign-in), and a repository
page needs triage or more on it (else: 404, the same answer as for a repository that does not exist).
A click on the page only enqueues a job; the feedback worker writes to GitHub.
"""

from __future__ import annotations

import hmac
import logging
import secrets
import uuid

from flask import Blueprint, abort, current_app, flash, g, redirect, render_template, request, session, url_for
from redis.exceptions import RedisError
from werkzeug.exceptions import HTTPException

from bot.decisions.commands import RETRAIN_ROLES  # who may manage models: the slash command's rule
from bot.metrics import live_workers
from bot.review import admins, charts, display, model_jobs, operator, pending, quality
from bot.review.access import RepositoryAccess, ReviewStore
from bot.review.decisions import (
    CHOICES,
    FILTERS,
    OUTCOMES,
    OWN_CHOICES,
    BadView,
    View,
    decisions_page,
    held_reason,
    is_shadow_mode,
    prediction_in,
    waiting_counts,
)
from bot.review.github_user import GitHubUserError, UserClient, authorize_url, exchange_code
from core import memory, store
from core.db import session_scope
from core.kinds import is_known_label, labels_for_kinds
from core.queues import CRASH_RETRY, REVIEW_PREDICTION, enqueue

log = logging.getLogger(__name__)
blueprint = Blueprint("review", __name__, url_prefix="/review", template_folder="templates")
display.install(blueprint)
PUBLIC = {"review.sign_in", "review.sign_in_github", "review.oauth_callback"}
MAX_BULK = 100  # predictions one "Accept selected" may queue
QUALITY_REFRESH = 30  # seconds between reloads of the quality page while one of its jobs is queued or running
ERROR_MESSAGES = {
    404: "There is no such page here, or the repository is not one where you have triage permission or more.",
    405: "This page cannot be used that way; use its links and buttons.",
    400: "The request was incomplete or out of date; go back, reload the page and try again.",
}


def _settings():
    return current_app.extensions["bot"]["settings"]


def _redis():
    return current_app.extensions["bot"]["redis"]


def _db():
    return session_scope(current_app.extensions["review"]["sessions"])


def _client() -> UserClient:
    return UserClient(_settings().api_url, g.reviewer.token)


def _safe_next(target: str | None) -> str:
    """Only a path of the review page itself: never another site after sign-in."""
    if target and target.startswith("/review/") and not target.startswith(("//", "/\\")):
        return target
    return url_for("review.repositories")


@blueprint.before_request
def require_reviewer():
    if request.endpoint in PUBLIC:
        return None
    g.reviewer = ReviewStore(_redis()).reviewer(session.get("sid"))
    if g.reviewer is None:
        session.pop("sid", None)
        target = request.full_path.rstrip("?") if request.method == "GET" else None
        return redirect(url_for("review.sign_in", next=target))
    if request.method == "POST":
        current_app.extensions["csrf"].protect()
    return None


@blueprint.errorhandler(GitHubUserError)
def github_failed(error: GitHubUserError):
    if error.status == 401:  # the user revoked the App's access, or the token expired
        if session.get("sid"):
            ReviewStore(_redis()).sign_out(session["sid"])
        session.clear()
        flash("GitHub no longer accepts your sign-in; please sign in again.")
        return redirect(url_for("review.sign_in"))
    log.warning("review page: GitHub call failed: %s", error)
    message = "GitHub did not answer as expected; try again soon."
    return render_template("review/error.html", title="GitHub did not answer", message=message), 502


@blueprint.errorhandler(HTTPException)
def http_error(error: HTTPException):
    """A 4xx on the review page is a page of its own, with a way back; JSON only to a client asking for it."""
    if error.code is None or not 400 <= error.code < 500:  # a redirect, or a 5xx: Flask's own answer
        return error
    custom = error.description if error.description != type(error).description else None
    message = custom or ERROR_MESSAGES.get(error.code, error.name)
    if _wants_json():
        return {"error": f"{error.name}: {message}"}, error.code
    back = g.get("repo")
    return render_template("review/error.html", title=error.name, message=message, back=back), error.code


@blueprint.errorhandler(RedisError)
def redis_failed(error: RedisError):
    log.error("review page: Redis unavailable (%s)", type(error).__name__)
    return render_template("review/error.html", title="Unavailable",
                           message="The queue is unavailable; try again soon."), 503


@blueprint.get("/sign-in")
def sign_in():
    return render_template("review/sign_in.html", next=_safe_next(request.args.get("next")))


@blueprint.get("/sign-in/github")
def sign_in_github():
    """Step 1 of GitHub's web flow: send the browser to GitHub with a fresh state."""
    settings, state = _settings(), secrets.token_urlsafe(32)
    session["oauth_state"], session["next"] = state, _safe_next(request.args.get("next"))
    return redirect(authorize_url(settings.web_url, settings.client_id,
                                  url_for("review.oauth_callback", _external=True), state))


@blueprint.get("/oauth/callback")
def oauth_callback():
    """Step 2: GitHub sent the browser back with a code; the state proves it is our own sign-in."""
    expected, state = session.pop("oauth_state", None), request.args.get("state", "")
    code = request.args.get("code")
    if not expected or not _same_state(str(expected), state) or not code:
        flash("The sign-in did not complete; please try again.")
        return redirect(url_for("review.sign_in"))
    settings = _settings()
    token = exchange_code(settings.web_url, settings.client_id, settings.client_secret, code,
                          url_for("review.oauth_callback", _external=True))
    user = UserClient(settings.api_url, token).user()
    login, user_id = user["login"], int(user["id"])
    admins.bind_login(_redis(), settings.admins, login, user_id)
    target = session.get("next") or url_for("review.repositories")
    session.clear()  # a new session for the signed-in user: nothing of the anonymous one carries over
    reviewer = ReviewStore(_redis()).sign_in(login, token, user_id)
    session["sid"], session["login"], session.permanent = reviewer.sid, login, True
    log.info("%s signed in to the review page", login)
    return redirect(target)


def _same_state(expected: str, state: str) -> bool:
    """Compared as bytes: compare_digest refuses a str that is not ASCII (it answered 500 to "é")."""
    return hmac.compare_digest(expected.encode("utf-8", "replace"), state.encode("utf-8", "replace"))


@blueprint.post("/sign-out")
def sign_out():
    ReviewStore(_redis()).sign_out(g.reviewer.sid)
    session.clear()
    flash("Signed out.")
    return redirect(url_for("review.sign_in"))


@blueprint.get("/")
def repositories():
    access = ReviewStore(_redis()).access(g.reviewer, _client())
    with _db() as db:
        counts = waiting_counts(db, access)
    repos = sorted(access.values(), key=lambda found: found.full_name)
    return render_template("review/repositories.html", repos=repos, counts=counts)


def _reviewable(owner: str, name: str) -> RepositoryAccess:
    """The reviewer's access to this repository; 404 without triage or more, as if it did not exist."""
    found = ReviewStore(_redis()).access(g.reviewer, _client()).get(f"{owner}/{name}")
    if found is None:
        abort(404)
    g.repo = found  # an error page of this repository leads back to it
    return found


def _known_labels(repo: str) -> list[str]:
    """The repository's labels that the bot can learn from: the ones a reviewer may pick."""
    with _db() as db:
        classes = list(getattr(store.serving_model_for(db, repo), "labels", None) or [])
    return [label for label in ReviewStore(_redis()).labels(g.reviewer, _client(), repo)
            if is_known_label(label, classes)]


@blueprint.get("/<owner>/<name>")
def repository(owner: str, name: str):
    repo = _reviewable(owner, name)
    which = request.args.get("filter", "waiting")
    if which not in FILTERS:
        abort(404, description=f"There is no filter {which[:40]!r}: the tabs are {', '.join(FILTERS)}.")
    try:
        view = View.from_args(request.args)
    except BadView as bad:
        abort(400, description=str(bad))
    with _db() as db:
        found = decisions_page(db, repo.full_name, which, request.args.get("page", 1, type=int), view)
        stored = store.find_repository(db, full_name=repo.full_name)
        fill = memory.stored_progress(stored) if stored is not None else None
        shadow, held = is_shadow_mode(db, repo.full_name), held_reason(db, repo.full_name)
    states = pending.states(_redis(), [row.prediction_id for row in found.rows])
    labels = _known_labels(repo.full_name)
    return render_template("review/repository.html", repo=repo, found=found, which=which, filters=FILTERS,
                           states=states, labels=labels, web_url=_settings().web_url, fill=fill,
                           shadow=shadow, held=held, view=view, outcomes=OUTCOMES, names=labels_for_kinds(labels),
                           idle=pending.ReviewState(),
                           # while a review is queued the page's script watches its rows (no reload, so
                           # no lost selection or place); without script, the page reloads itself
                           watch=any(state.queued for state in states.values()))


@blueprint.get("/<path:unknown>")
def unknown_page(unknown: str):
    """A mistyped address under /review is the review page's 404, not the webhook's JSON one."""
    abort(404)


def _wants_json() -> bool:
    """The page's script asks for JSON (fetch, no reload); a plain form gets a redirect back."""
    return request.accept_mimetypes.best_match(["text/html", "application/json"]) == "application/json"


def _back(owner: str, name: str, anchor: str | None = None):
    """Back to the list the click came from, at the row clicked (no jump to the top)."""
    target = request.form.get("back")
    if target and _safe_next(target) == target:
        return redirect(target + (f"#{anchor}" if anchor else ""), 303)
    return redirect(url_for("review.repository", owner=owner, name=name,
                            filter=request.form.get("filter", "waiting"),
                            page=request.form.get("page", 1, type=int), _anchor=anchor), 303)


def _answer(owner: str, name: str, results: list[dict], anchor: str | None = None):
    if _wants_json():
        return {"results": results}
    for result in results:
        flash(result["message"])
    return _back(owner, name, anchor)


@blueprint.post("/<owner>/<name>/predictions/<int:prediction_id>")
def review(owner: str, name: str, prediction_id: int):
    """One click: queue the review for the feedback worker, then back to the row, which says "queued"."""
    repo = _reviewable(owner, name)
    with _db() as db:
        row = prediction_in(db, repo.full_name, prediction_id)
    if row is None:
        abort(404)
    result = _queue_review(repo, row, request.form.get("choice"), request.form.get("label") or None)
    return _answer(owner, name, [result], anchor=f"prediction-{prediction_id}")


@blueprint.post("/<owner>/<name>/predictions/accept")
def accept_many(owner: str, name: str):
    """Accept several at once: one review job per prediction, as if each had been clicked."""
    repo = _reviewable(owner, name)
    ids = list(dict.fromkeys(request.form.getlist("prediction_id", type=int)))
    if not ids:
        abort(400, description="Select the issues to accept first.")
    if len(ids) > MAX_BULK:
        abort(400, description=f"Accept at most {MAX_BULK} issues at once.")
    with _db() as db:
        rows = [prediction_in(db, repo.full_name, prediction_id) for prediction_id in ids]
    if any(row is None for row in rows):
        abort(404)
    results = [_queue_review(repo, row, "accept", None) for row in rows]
    queued = sum(result["queued"] for result in results)
    log.info("%s accepted %d of %d selected on %s", g.reviewer.login, queued, len(rows), repo.full_name)
    return _answer(owner, name, results, anchor=f"prediction-{ids[0]}")


def _queue_review(repo: RepositoryAccess, row, choice: str | None, label: str | None) -> dict:
    """Queue one review job, unless the click cannot stand; what happened, for the page."""
    result = {"prediction_id": row.prediction_id, "number": row.number, "queued": False}
    problem = _review_problem(row, choice, label, repo.full_name)
    if problem:
        return result | {"message": problem}
    job = {"review_id": uuid.uuid4().hex, "installation_id": repo.installation_id, "repo": repo.full_name,
           "number": row.number, "prediction_id": row.prediction_id, "choice": choice,
           "label": label if choice in ("relabel", *OWN_CHOICES) else None,
           "reviewer_login": g.reviewer.login}
    subject = pending.subject_of(choice, label)  # the kind, or one own label: each reviewed on its own
    result["subject"] = subject
    shown = {"choice": choice, "label": job["label"], "by": g.reviewer.login, "review_id": job["review_id"]}
    if not pending.mark_queued(_redis(), row.prediction_id, shown, subject=subject):
        what = f"{label!r} on #{row.number}" if subject != pending.KIND else f"#{row.number}"
        return result | {"message": f"A review of {what} is queued already."}
    try:
        enqueue(_redis(), REVIEW_PREDICTION, job, retry=CRASH_RETRY)
    except RedisError:
        pending.unmark(_redis(), row.prediction_id, subject)
        raise
    state = f"{choice}{' ' + job['label'] if job['label'] else ''} by {g.reviewer.login}"
    described = {"accept": f"accept {row.label!r}", "relabel": f"label {label!r}", "reject": "reject",
                 "own-accept": f"accept {label!r}", "own-reject": f"reject {label!r}"}[choice]
    return result | {"queued": True, "state": state, "message": f"Queued: {described} on #{row.number}."}


def _review_problem(row, choice: str | None, label: str | None, repo: str) -> str | None:
    if choice in OWN_CHOICES:  # an own label is judged on its own, whatever became of the kind
        if not any(own.label == label and own.decision is None for own in row.own):
            return f"{label!r} is no undecided own label of #{row.number}."
        return None
    if choice not in CHOICES:
        return "Pick accept, another label, or reject."
    if not row.reviewable:
        return f"#{row.number} is decided already."
    if choice == "accept" and not row.label:
        return f"The bot chose no label on #{row.number}; pick one instead."
    if choice == "relabel" and label not in _known_labels(repo):
        return "Pick one of the repository's labels."
    return None


# ---- the operator's page: the instance's admins only (ISSUE_SORTER_ADMINS); anyone else gets 404 -----

def _operator() -> None:
    if not admins.is_admin(_redis(), _settings().admins, g.reviewer.user_id):
        abort(404)


@blueprint.get("/operator")
def operator_page():
    _operator()
    with _db() as db:
        return render_template("review/operator.html", queues=operator.queue_rows(_redis()),
                               alive=live_workers(_redis()), failed=operator.failed_jobs(_redis()),
                               workers=operator.worker_rows(_redis()), runs=operator.training_runs(db),
                               serving=operator.serving_models(db))


@blueprint.post("/operator/jobs/<queue>/<job_id>/retry")
def operator_retry(queue: str, job_id: str):
    _operator()
    retried = operator.retry_failed(_redis(), queue, job_id)
    flash(f"{job_id} is queued again." if retried else f"{job_id} is no longer among the failed jobs.")
    log.info("%s retried failed job %s of %s: %s", g.reviewer.login, job_id, queue, retried)
    return redirect(url_for("review.operator_page"), 303)


# ---- a repository's quality: charts, its models, and the buttons of those who manage it -----------------

@blueprint.get("/<owner>/<name>/quality")
def quality_page(owner: str, name: str):
    from bot.labeling import backtest  # these load the model code: not for every page
    from bot.lifecycle import preview

    repo = _reviewable(owner, name)
    with _db() as db:
        weeks, models = quality.weekly(db, repo.full_name), quality.model_history(db, repo.full_name)
        target = quality.precision_target(db, repo.full_name, default_threshold=_settings().threshold)
        shadow, held = is_shadow_mode(db, repo.full_name), held_reason(db, repo.full_name)
        own = quality.own_label_quality(db, repo.full_name)
    jobs = model_jobs.states(_redis(), repo.full_name)
    return render_template("review/quality.html", repo=repo, weeks=weeks, models=models, target=target,
                           own=own,
                           manage=repo.role in RETRAIN_ROLES, shadow=shadow, held=held, jobs=jobs,
                           min_week=quality.MIN_WEEK_DECISIONS,
                           preview=preview.REPORTS.last(_redis(), repo.full_name),
                           backtest=backtest.REPORTS.last(_redis(), repo.full_name),
                           refresh=QUALITY_REFRESH if any(job.pending for job in jobs.values()) else None)


@blueprint.get("/<owner>/<name>/charts/<which>.png")
def chart(owner: str, name: str, which: str):
    from bot.labeling import backtest

    repo = _reviewable(owner, name)
    with _db() as db:
        drawings = {"weekly": lambda: charts.weekly_quality(quality.weekly(db, repo.full_name)),
                    "backtest": lambda: charts.backtest_curve(backtest.REPORTS.last(_redis(), repo.full_name)),
                    "decisions": lambda: charts.decisions_matrix(quality.decided_pairs(db, repo.full_name)),
                    "models": lambda: charts.model_history(quality.model_history(db, repo.full_name))}
        if which not in drawings:
            abort(404)
        png = drawings[which]()
    return current_app.response_class(png, mimetype="image/png", headers={"Cache-Control": "private, max-age=60"})


@blueprint.post("/<owner>/<name>/models/<action>")
def manage_models(owner: str, name: str, action: str):
    """Retrain, promote (through the gate), roll back: admin or maintain permission, as for the command;
    the preview: triage. One job per repository and action at a time, then a cooldown (model_jobs)."""
    repo = _reviewable(owner, name)
    managing = action in model_jobs.MANAGING
    if action not in model_jobs.ACTIONS or (managing and repo.role not in RETRAIN_ROLES):
        abort(404)
    kwargs = {"retrain": {"scope": repo.full_name, "trigger": "review"},
              "promote": {"version": request.form.get("version", ""), "scope": repo.full_name,
                          "requested_by": g.reviewer.login},
              "rollback": {"scope": repo.full_name, "requested_by": g.reviewer.login},
              "preview": {"repo": repo.full_name}, "backtest": {"repo": repo.full_name}}[action]
    back = redirect(url_for("review.quality_page", owner=owner, name=name, _anchor="jobs"), 303)
    try:
        model_jobs.queue_action(_redis(), action, repo.full_name, g.reviewer.login, kwargs)
    except model_jobs.Refused as refused:
        flash(str(refused))
        return back
    log.info("%s queued %s for %s", g.reviewer.login, action, repo.full_name)
    flash(f"Queued: {action}. The page shows it running, then its result.")
    return back
