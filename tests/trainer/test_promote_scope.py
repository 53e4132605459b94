"""A version serves only its own scope or, when global, any: version names are guessable
(`scope-YYYYmmdd-HHMMSS`), and the review page's promote button once promoted any of them for the caller's
repository, so a maintainer of one repository could serve another installation's private model and read its
classes. The refusal is the registry's, so every way to promote meets it."""

from __future__ import annotations

import dataclasses

import pytest
from sqlalchemy import select

from core.db import make_sessionmaker
from core.settings import Settings
from core.tables import ModelPromotion
from trainer import context, jobs
from trainer.context import TrainingContext
from trainer.gate import compare_and_promote
from trainer.registry import ScopeRefused

PRIVATE, MINE = "victim-org/private-repo", "me/my-repo"


def test_another_scopes_version_is_refused_and_nothing_is_promoted(registry, tfidf_model, session):
    theirs = registry.register(tfidf_model, scope=PRIVATE)
    with pytest.raises(ScopeRefused, match="was not trained for me/my-repo"):
        registry.promote(theirs.version, "review", scope=MINE)
    with pytest.raises(ScopeRefused):  # how the promote command and the review page find what they gate
        registry.model(theirs.version, scope=MINE)
    with pytest.raises(ScopeRefused):  # the gate's promotion meets the same refusal
        compare_and_promote(registry, theirs, [], scope=MINE, trigger="review")
    assert session.scalars(select(ModelPromotion)).all() == []


def test_own_and_global_versions_still_serve(registry, tfidf_model):
    mine, shared = registry.register(tfidf_model, scope=MINE), registry.register(tfidf_model)
    assert registry.promote(shared.version, "global for me", scope=MINE).scope == MINE
    assert registry.promote(mine.version, "mine", scope=MINE).scope == MINE
    assert registry.promote(shared.version, "its own scope").scope == "global"


def test_the_review_pages_promote_job_says_why_it_refused(registry, tfidf_model, session, database_url,
                                                          model_dir, redis):
    theirs = registry.register(tfidf_model, scope=PRIVATE)
    session.commit()
    settings = dataclasses.replace(Settings(webhook_secret="s"), database_url=database_url,
                                   model_dir=model_dir)
    context.configure(TrainingContext(settings, make_sessionmaker(database_url), redis))
    try:
        message = jobs.promote_version(version=theirs.version, scope=MINE, requested_by="mallory")
    finally:
        context.configure(None)
    assert message == (f"not promoted: {theirs.version} was not trained for {MINE}: only its own versions "
                       "and the global ones may serve it")
