"""Operator commands of the learning loop, of deliveries and of data: retrain, backfill, stats, replay,
redeliver, purge."""

from __future__ import annotations

import argparse
import datetime as dt
import json
import random
import sys
import tempfile
from pathlib import Path

from core.db import make_sessionmaker, session_scope
from core.settings import Settings
from issue_sorter.command import add, open_registry


def add_commands(commands) -> None:
    """Add the learning loop's operator commands to the `issue-sorter` tree."""
    retrain = add(commands, "retrain", cmd_retrain, "train a challenger now and promote it if it beats the champion")
    retrain.add_argument("--repo", help="owner/name (default: the global model)")
    retrain.add_argument("--force", action="store_true", help="promote even if it does not score better")
    backfill = add(commands, "backfill", cmd_backfill, "read a repository's labelled issues as training data")
    backfill.add_argument("repo", help="owner/name")
    backfill.add_argument("--max-issues", type=int, default=1000)
    stats = add(commands, "stats", cmd_stats, "live quality: suggestions, accepted, rejected, corrected")
    stats.add_argument("--repo", help="owner/name")
    stats.add_argument("--json", action="store_true")
    redeliver = add(commands, "redeliver", cmd_redeliver,
                    "ask GitHub to redeliver the failed webhook deliveries we never processed")
    redeliver.add_argument("--since", metavar="DURATION_OR_ISO",
                           help="look back this far: 90m, 6h, 2d or an ISO 8601 time (default and limit: "
                                "GitHub's three days)")
    redeliver.add_argument("--max", type=int, help="asks at most (default 50; 0 only counts); the next sweep "
                                                   "asks the rest")
    redeliver.add_argument("--again", action="store_true",
                           help="ask again for deliveries asked for before whose redelivery failed too")
    purge = add(commands, "purge", cmd_purge,
                "delete everything stored of a repository: issues, predictions, decisions, its models")
    purge.add_argument("repo", help="owner/name")
    replay = add(commands, "replay", cmd_replay, "replay a labelled file through the pipeline; learning curve",
                 database=False)
    replay.add_argument("file", type=Path)
    replay.add_argument("--repo", required=True, help="the file's repository to replay (owner/name)")
    replay.add_argument("--retrain-every", type=int, default=50, help="confirmed issues between retrainings")
    replay.add_argument("--window", type=int, help="issues per curve point (default: --retrain-every)")
    replay.add_argument("--limit", type=int, help="replay only the first N new issues (after --history)")
    replay.add_argument("--history", type=int, default=0, metavar="N",
                        help="the first N issues (in --order) are the repository's labelled history when the App "
                             "is installed: backfilled and embedded into its memory before the first new issue")
    replay.add_argument("--base-model-dir", type=Path, help="model serving at the start (default: the promoted one)")
    replay.add_argument("--label-map", help="kind=label pairs, e.g. 'bug=Type: Bug,feature=Type: Feature Request'")
    replay.add_argument("--epochs", type=int, default=2, help="epochs of each retraining")
    replay.add_argument("--max-length", type=int, default=256, help="tokens per issue when retraining")
    replay.add_argument("--min-per-label", type=int, default=20, help="issues per label for the repo's own labels")
    replay.add_argument("--min-holdout", type=int, default=50,
                        help="recent confirmed issues the gate judges each retraining on (twice as many needed)")
    replay.add_argument("--order", choices=("time", "shuffled"), default="time",
                        help="time: as the issues were opened; shuffled: seeded random order, for files sampled "
                             "per label (NLBSE took the newest 100 of each label, so its time order is skewed)")
    replay.add_argument("--seed", type=int, default=42, help="seed of --order shuffled")
    replay.add_argument("--target-precision", type=float, metavar="P",
                        help="the repository's config asks for precision P (0-1): the App abstains below each kind's "
                             "threshold for it, as an install with that target (default: every issue labelled)")
    replay.add_argument("--out", type=Path, default=Path("var/replay"), help="where the CSV and PNG go")
    replay.add_argument("--json", action="store_true")
    replay.add_argument("--no-memory", action="store_true",
                        help="confirmed issues do not adjust the next scores (measures retraining alone)")
    replay.add_argument("--no-retrain", action="store_true", help="never retrain (measures the memory alone)")
    replay.add_argument("--no-learning", action="store_true",
                        help="the starting model serves frozen: no memory, no retraining (the baseline)")


def cmd_retrain(args: argparse.Namespace, settings: Settings) -> int:
    from core.tables import GLOBAL_SCOPE
    from trainer.retrain import RetrainPolicy, retrain_scope

    with open_registry(settings) as registry:
        result = retrain_scope(registry.session, registry, args.repo or GLOBAL_SCOPE,
                               policy=RetrainPolicy.from_settings(settings), force=args.force, trigger="manual",
                               progress=True)
        print(result.summary())
    return 0 if result.run is not None else 1


def cmd_backfill(args: argparse.Namespace, settings: Settings) -> int:
    from bot.github_api.client import GitHubApp
    from bot.lifecycle.backfill import backfill

    if settings.dry_run:
        raise SystemExit("backfill reads GitHub: set GITHUB_APP_ID and GITHUB_PRIVATE_KEY")
    app = GitHubApp.from_settings(settings)
    installation_id = app.installation_id_for(args.repo)
    sessions = make_sessionmaker(settings.database_url)
    print(backfill(sessions, app.writer_for(installation_id), args.repo, installation_id=installation_id,
                   max_issues=args.max_issues))
    if settings.redis_url:
        from redis import Redis

        from bot.decisions.memory_fill import queue_fill_by_serving
        from bot.jobs import queue_backtest

        redis = Redis.from_url(settings.redis_url)
        if settings.memory and queue_fill_by_serving(redis, sessions, args.repo,  # the feedback worker embeds it
                                                     limit=settings.max_queued_memory_fills) is not None:
            print(f"the memory's fill of {args.repo} is queued on the feedback queue")
        queue_backtest(redis, args.repo)  # the dry run on the history, as after an installation's backfill
    return 0


def cmd_redeliver(args: argparse.Namespace, settings: Settings) -> int:
    from redis import Redis

    from bot.github_api.client import GitHubApp
    from bot.intake.redelivery import MAX_ASKS, Ledger, parse_since, sweep

    if settings.dry_run:
        raise SystemExit("redeliver cannot ask GitHub in dry-run: set GITHUB_APP_ID and GITHUB_PRIVATE_KEY; "
                         "nothing was asked")
    if not settings.redis_url:
        raise SystemExit("redeliver: REDIS_URL is not set (it knows what is queued and what was asked for)")
    now = dt.datetime.now(dt.UTC)
    since = parse_since(args.since, now) if args.since else None
    app = GitHubApp.from_settings(settings)
    ledger = Ledger(Redis.from_url(settings.redis_url), make_sessionmaker(settings.database_url),
                    again=args.again)
    result = sweep(app, ledger, now=now, since=since, limit=MAX_ASKS if args.max is None else args.max)
    if since is not None and result.since > since:
        print(f"GitHub redelivers only the past three days: looking back to {result.since:%Y-%m-%d %H:%M} "
              "UTC")
    for delivery in result.asked:
        print(f"asked: {delivery.describe()}")
    for delivery, why in result.refused:
        print(f"refused: {delivery.describe()}: {why}")
    for delivery in result.given_up:
        print(f"given up (its redeliveries failed too; --again asks once more): {delivery.describe()}")
    print(result.summary())
    return 1 if result.stopped else 0


def cmd_purge(args: argparse.Namespace, settings: Settings) -> int:
    from redis import Redis

    from bot.lifecycle import repositories
    from core import store

    with session_scope(make_sessionmaker(settings.database_url)) as session:
        repository = store.find_repository(session, full_name=args.repo)
        if repository is None:
            raise SystemExit(f"purge: no repository {args.repo!r} is stored; nothing was deleted")
        purged = repositories.purge(session, [repository], settings.model_dir)
    redis = Redis.from_url(settings.redis_url) if settings.redis_url else None
    repositories.delete_directories(purged, redis)
    print(f"{args.repo}: {purged.summary()}" + ("" if redis else "; REDIS_URL is not set: its copies in Redis "
                                                "(config file, labels, previews) expire on their own"))
    return 0


def cmd_stats(args: argparse.Namespace, settings: Settings) -> int:
    from bot.decisions.stats import format_table, live_stats

    with session_scope(make_sessionmaker(settings.database_url)) as session:
        stats = live_stats(session, args.repo)
    print(json.dumps(stats, indent=2) if args.json else format_table(stats))
    return 0


def cmd_replay(args: argparse.Namespace, settings: Settings) -> int:
    try:
        from simulation.replay import ReplayOptions, replay, write_curve
    except ModuleNotFoundError as error:
        if error.name != "simulation":
            raise
        raise SystemExit("issue-sorter replay needs the simulation package of a source checkout "
                         "(the service's image leaves it out)") from None
    from trainer.dataset import load_file

    examples = [e for e in load_file(args.file) if e.repo in (None, args.repo)]
    if not examples:
        raise SystemExit(f"no issues of {args.repo} in {args.file}")
    examples = sorted(examples, key=lambda e: (e.created_at is None, e.created_at or 0))
    if args.order == "shuffled":
        random.Random(args.seed).shuffle(examples)
    if args.history < 0:
        raise SystemExit(f"--history must be 0 or more issues, not {args.history}")
    if args.history >= len(examples):
        raise SystemExit(f"--history {args.history} leaves no new issue: {args.file} has {len(examples)} issues of "
                         f"{args.repo} (use 0 to {len(examples) - 1})")
    history, examples = examples[:args.history], examples[args.history:][:args.limit]
    try:
        options = ReplayOptions(repo=args.repo, retrain_every=args.retrain_every, window=args.window,
                                retrain_epochs=args.epochs, retrain_max_length=args.max_length,
                                min_per_label=args.min_per_label, min_holdout=args.min_holdout,
                                memory=not (args.no_memory or args.no_learning),
                                retrain=not (args.no_retrain or args.no_learning),
                                target_precision=args.target_precision,
                                threshold=None if args.target_precision is None else settings.threshold)
    except ValueError as error:  # the target, checked as the repository's config file checks it
        raise SystemExit(f"--target-precision: {error}") from None
    if args.label_map:
        options.label_names.update(dict(pair.split("=", 1) for pair in args.label_map.split(",")))
    base = args.base_model_dir or _promoted_model_dir(settings)
    with tempfile.TemporaryDirectory(prefix="issue-sorter-replay-") as workdir:
        result = replay(examples, options, base, workdir=Path(workdir), progress=not args.json, history=history)
    csv_path, png_path = write_curve(result, args.out)
    if args.json:
        print(json.dumps(result))
    else:
        if history:
            print(f"installed with {result['history']} labelled issues: {result['history_backfilled']} backfilled, "
                  f"{result['memory_at_install']} in the memory")
        for point in result["curve"]:
            print(f"after {point['seen']:>4} new issues: accuracy {point['accuracy']:.3f}, macro-F1 "
                  f"{point['macro_f1']:.3f} on the next {point['issues']} ({point['model']})")
        print(f"curve: {csv_path}, {png_path}")
    return 0


def _promoted_model_dir(settings: Settings) -> Path:
    from core import store

    with session_scope(make_sessionmaker(settings.database_url)) as session:
        version = store.serving_model_version(session)
        if version is None:
            print("no model is promoted: run `issue-sorter bootstrap-model` or pass --base-model-dir", file=sys.stderr)
            raise SystemExit(1)
        return Path(version.path)
