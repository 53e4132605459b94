"""app.yml subscribes to every event the receiver routes (those GitHub sends every App aside)."""

from __future__ import annotations

from pathlib import Path

from bot.github_api.manifest import load_app_yml
from bot.intake.events import PARSED_EVENTS

APP_YML = Path(__file__).resolve().parents[3] / "app.yml"
DELIVERED_WITHOUT_SUBSCRIBING = {"installation", "installation_repositories"}


def test_app_yml_subscribes_to_every_event_the_receiver_parses():
    """`repository` events were parsed and routed, but the manifest never subscribed to them, so a
    repository made private kept feeding shared training until its next issue event."""
    events = set(load_app_yml(APP_YML.read_text())["default_events"])
    assert PARSED_EVENTS - DELIVERED_WITHOUT_SUBSCRIBING <= events
    assert "repository" in events
