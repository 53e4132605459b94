"""What core.repository_thresholds costs the labelling job's gather step: a full memory (MEMORY_SIZE rows of
384-d embeddings with raw scores) and judged predictions in SQLite, timed on a cache miss (the memory grew)
and on a hit (nothing moved).

    nice .venv/bin/python -m bench.threshold_cost [--rows 2000] [--predictions 300] [--repeat 5]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time

from bench.quality import machine

CLASSES = ["bug", "docs", "feature", "question"]


def fill(session, repository, rows: int, predictions: int, dimensions: int, rng: random.Random) -> None:
    from core import memory, store
    from core.tables import ModelVersion, Prediction

    version = ModelVersion(version="v1", path="unused", labels=CLASSES)
    session.add(version)
    session.flush()
    for number in range(1, rows + predictions + 1):
        label = rng.choice(CLASSES)
        issue = store.upsert_issue(session, repository, number, title="t", body="", author_login="a", state="open")
        issue.confirmed_label = label
        weights = [rng.random() + (2 if c == label else 0) for c in CLASSES]
        scores = {c: w / sum(weights) for c, w in zip(CLASSES, weights, strict=True)}
        if number <= rows:
            memory.remember(session, issue, label, "v1", [rng.gauss(0, 1) for _ in range(dimensions)], scores=scores)
        else:
            session.add(Prediction(issue_id=issue.id, model_version_id=version.id, scores=scores,
                                   predicted=max(scores, key=scores.get), outcome="applied", decision="accepted"))
    session.flush()


def main() -> int:
    from core import store
    from core.db import Base, make_sessionmaker, session_scope
    from core.repository_thresholds import repository_thresholds
    from core.tables import Repository

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=2000)
    parser.add_argument("--predictions", type=int, default=300)
    parser.add_argument("--dimensions", type=int, default=384)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        sessions = make_sessionmaker(f"sqlite:///{directory}/cost.db")
        Base.metadata.create_all(sessions.kw["bind"])
        with session_scope(sessions) as session:
            repository = store.ensure_repository(session, "octo/repo", 1)
            fill(session, repository, args.rows, args.predictions, args.dimensions, random.Random(1))
            repository_id = repository.id
        timings = {"miss": [], "hit": []}
        for _ in range(args.repeat):
            for kind in ("miss", "hit"):
                with session_scope(sessions) as session:
                    if kind == "miss":
                        session.get(Repository, repository_id).threshold_cache = None
                    started = time.perf_counter()
                    repository_thresholds(session, repository_id, "v1", CLASSES, 0.9, {})
                    timings[kind].append(time.perf_counter() - started)
    print(f"{machine()}: {args.rows} memory rows ({args.dimensions}-d), {args.predictions} judged predictions, "
          f"median of {args.repeat}")
    for kind, values in timings.items():
        print(f"  cache {kind}: {statistics.median(values) * 1000:.1f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
