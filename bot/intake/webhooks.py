"""POST /webhook: verify, parse, enqueue, answer. No GitHub calls, no database, no model here."""

from __future__ import annotations

import datetime as dt
import logging

from flask import Blueprint, current_app, g, request
from redis.exceptions import RedisError

from bot.github_api.issues import event_time
from bot.intake import events, queueing
from bot.intake.events import event_label
from bot.intake.signatures import verify_signature
from core import queues
from core.queues import JobSpec

log = logging.getLogger(__name__)
blueprint = Blueprint("webhooks", __name__)

# (event type, action or None for any) → the job that handles it. The whole routing table of the bot.
ROUTES: dict[tuple[type, str | None], JobSpec] = {
    (events.IssueEvent, "opened"): queues.LABEL_ISSUE,
    **{(events.IssueEvent, action): queues.RECORD_ISSUE_EVENT
       for action in events.ISSUE_ACTIONS - {"opened"}},
    (events.CommentEvent, None): queues.HANDLE_COMMENT,
    (events.InstallationEvent, "created"): queues.BACKFILL_INSTALLATION,
    (events.InstallationEvent, "added"): queues.BACKFILL_INSTALLATION,
    (events.InstallationEvent, "deleted"): queues.REMOVE_INSTALLATION,
    (events.InstallationEvent, "removed"): queues.REMOVE_REPOSITORIES,
    (events.InstallationEvent, "suspend"): queues.SUSPEND_INSTALLATION,
    (events.InstallationEvent, "unsuspend"): queues.SUSPEND_INSTALLATION,
    (events.RepositoryEvent, None): queues.UPDATE_REPOSITORY,  # renamed, transferred, privatized, publicized
    (events.LabelEvent, None): queues.REFRESH_LABELS,  # created, edited, deleted
}


def route_for(event: events.Event) -> JobSpec | None:
    action = getattr(event, "action", None)
    return ROUTES.get((type(event), action)) or ROUTES.get((type(event), None))


@blueprint.post("/webhook")
def receive():
    body = request.get_data(cache=True)  # raises 413 above MAX_CONTENT_LENGTH before we read it
    delivery_id = request.headers.get("X-GitHub-Delivery", "")
    settings = current_app.extensions["bot"]["settings"]
    if not verify_signature(body, request.headers.get("X-Hub-Signature-256"), settings.webhook_secret):
        log.warning("rejected delivery %r: missing or wrong signature", delivery_id)
        return {"error": "invalid signature"}, 401
    g.signed = True  # bot.metrics counts this delivery by its event from here on
    event_name = request.headers.get("X-GitHub-Event", "")
    if not event_name or not delivery_id:
        return {"error": "missing X-GitHub-Event or X-GitHub-Delivery header"}, 400
    if event_name == "ping":
        return {"ok": True, "zen": "pong"}, 200
    try:
        payload = events.decode_body(body, request.mimetype)
        received_at = dt.datetime.now(dt.timezone.utc).isoformat()
        event = events.parse(event_name, delivery_id, payload, received_at=received_at)
    except events.UnsupportedContentType as error:
        return {"error": str(error)}, 415
    except events.MalformedPayload as error:
        return {"error": f"malformed payload: {error}"}, 400
    route = route_for(event) if event else None
    if route is None:
        return "", 204
    # dated as the worker orders an issue's events; an installation event by arrival (the body markers guard it)
    happened = event_time(None, received_at, payload.get("issue"), payload.get("comment"))
    if _too_old(happened, settings.max_event_age):
        log.warning("ignored delivery %s: its event is older than GitHub's redelivery window", delivery_id)
        g.outcome = "too_old"  # a 200 like a ping's, counted apart (bot.metrics.count_delivery)
        return {"ignored": "event older than GitHub's redelivery window", "delivery": delivery_id}, 200
    return _enqueue(route, event, queueing.body_digest(body))


def _too_old(happened: dt.datetime | None, max_age: int) -> bool:
    """A replay of an old capture: the body markers that stop replays last only this long."""
    now = dt.datetime.now(dt.timezone.utc)
    return bool(max_age and happened and (now - happened).total_seconds() > max_age)


def _enqueue(job: JobSpec, event: events.Event, body_sha256: str):
    try:
        extensions = current_app.extensions["bot"]
        created = queueing.enqueue_once(extensions["redis"], job, event.delivery_id,
                                        event.job_kwargs(), body_sha256=body_sha256,
                                        count_event=event_label(request.headers.get("X-GitHub-Event")),
                                        write_interval=extensions["settings"].github_write_interval)
        g.delivery_counted = True  # in the same round trip (bot.metrics.count_delivery counts the rest)
    except queueing.ReplayedBody as error:
        log.warning("refused delivery %s: %s", event.delivery_id, error)
        return {"error": "this body was already delivered under another X-GitHub-Delivery"}, 409
    except RedisError as error:
        log.error("cannot queue delivery %s: Redis unavailable (%s)", event.delivery_id, type(error).__name__)
        return {"error": "queue unavailable, please redeliver"}, 503
    return {"queued": created, "delivery": event.delivery_id}, 202
