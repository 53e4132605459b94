"""The model commands of `issue-sorter`: train, bootstrap-model, select, evaluate, models, promote, rollback,
convert-tfidf, gc-models."""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import time
from collections.abc import Sequence
from pathlib import Path

from redis import Redis
from redis.exceptions import RedisError

from core.card import base_model_name
from core.engines import served_engine
from core.settings import Settings
from core.tables import GLOBAL_SCOPE
from issue_sorter.command import add, open_registry
from trainer import pipeline, publish
from trainer.bootstrap import BOOTSTRAP_ENV, HUB, choose_source, load_source
from trainer.config import (
    BOOTSTRAP_RECIPE,
    CLASS_WEIGHTS,
    DEFAULT_BUDGET_MINUTES,
    PRECISIONS,
    TRUNCATIONS,
    TrainConfig,
)
from trainer.dataset import FORMATS, HUB_DATASET, TEST_REPOS, Example, load_database, load_file
from trainer.evaluate import evaluate_classifier, plot_confusion
from trainer.fast_path import FastPathOptions, default_gate_issues, gate_pending
from trainer.gate import compare_and_promote, verdict
from trainer.jobs import queue_pending_gates
from trainer.registry import KEEP_PROMOTED
from trainer.sources import load_sources

# the TrainConfig fields a training command takes as flags (--max-length for max_length), typed as the field is
TRAIN_FIELDS = ("base_model", "epochs", "max_length", "batch_size", "lr", "seed", "max_steps", "truncation",
                "device", "precision", "tfidf_share", "class_weight")
TRAIN_FLAGS = {  # flag → (TrainConfig field, type)
    f"--{field.name.replace('_', '-')}": (field.name, {"int": int, "float": float}.get(
        field.type.removesuffix(" | None"), str))
    for field in dataclasses.fields(TrainConfig) if field.name in TRAIN_FIELDS}


def add_commands(subparsers) -> None:
    """Add the model commands to the `issue-sorter` tree."""
    for name, handler, help_text, configure in [
            ("train", train, "fine-tune on a labelled file and register the model", _train_parser),
            ("bootstrap-model", bootstrap_model,
             "fine-tune the offline MiniLM on public issues, blend it with TF-IDF, register and promote it",
             _bootstrap_parser),
            ("select", select, "compare encoders (and TF-IDF) on held-out projects; register the best", _select_parser),
            ("evaluate", evaluate, "score a registered model on a labelled file", _evaluate_parser),
            ("models", models, "list registered model versions", lambda parser: None),
            ("promote", promote, "promote a version (through the gate unless --force)", _promote_parser),
            ("rollback", rollback, "serve again the version that served before the current one", _scope_argument),
            ("convert-tfidf", convert_tfidf, ("rewrite registered TF-IDF models pickled by older versions as "
                                              "data (runs the pickles: only for models you trust)"),
             lambda parser: parser.add_argument("versions", nargs="*",
                                                help="registered versions (default: every one)")),
            ("gc-models", gc_models, ("delete the files of versions neither serving nor kept for rollback "
                                      "(the training worker does it after each retraining)"), _gc_parser),
            ("push-model", push_model, "publish a registered version to the Hugging Face hub or a directory",
             _push_parser),
            ("pull-model", pull_model, "register a published model (hub id or directory); the gate decides",
             _pull_parser)]:
        configure(add(subparsers, name, handler, help_text))


# ---- parsers ----

def _training_arguments(parser: argparse.ArgumentParser, defaults: TrainConfig | None = None) -> None:
    defaults = defaults or TrainConfig()
    for flag, (name, kind) in TRAIN_FLAGS.items():
        shown = getattr(defaults, name) if name != "base_model" else "the offline all-MiniLM-L6-v2"
        parser.add_argument(flag, dest=name, type=kind, default=None,
                            choices={"truncation": TRUNCATIONS, "class_weight": CLASS_WEIGHTS,
                                     "precision": PRECISIONS}.get(name),
                            help=f"TrainConfig.{name} (default: {shown})")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")


def _scope_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--scope", default=GLOBAL_SCOPE, help="'global' or a repository owner/name")


def _train_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", type=Path,
                        help="CSV, JSON Lines or Parquet: title, body, label[, repo, created_at]")
    _training_arguments(parser)
    _scope_argument(parser)
    parser.add_argument("--eval", type=Path,
                        help="held-out labelled file for metrics, thresholds and the gate")
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--promote", action="store_true", help="promote if it beats the serving model")
    group.add_argument("--force", action="store_true", help="promote whatever the scores")


def _bootstrap_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--data", help=f"a training file, or `{HUB}` for {HUB_DATASET} (default: ${BOOTSTRAP_ENV}, "
                                       f"then ../shared beside the checkout, then the hub)")
    parser.add_argument("--eval", type=Path, help="held-out file (default: issues_test.csv beside the data, or "
                                                  "the hub's held-out projects)")
    parser.add_argument("--revision", help=f"the commit (or branch, tag) of {HUB_DATASET} to read "
                                           "(default: main); the card records the commit read")
    parser.add_argument("--force", action="store_true", help="promote even if a better model serves")
    # `issue-sorter run`'s: gate the engine this CPU serves, queue the others' gates for its training worker
    parser.add_argument("--gate-others-later", action="store_true", help=argparse.SUPPRESS)
    _training_arguments(parser, TrainConfig(**BOOTSTRAP_RECIPE))


def _select_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", type=Path, nargs="?",
                        help="labelled issues with a repository each (default: every source of ../shared)")
    _format_argument(parser)
    parser.add_argument("--candidates", required=True, help="comma-separated hub ids or model directories")
    parser.add_argument("--folds", type=int, default=3, help="folds of whole repositories (unseen protocol)")
    parser.add_argument("--budget-minutes", type=float, default=DEFAULT_BUDGET_MINUTES,
                        help="CPU minutes training on the whole mix may take (estimated from the folds); "
                             "a candidate over it cannot win")
    _training_arguments(parser, TrainConfig(**BOOTSTRAP_RECIPE))
    _scope_argument(parser)


def _format_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--format", choices=FORMATS, default=None,
                        help="how to read FILE (default: by its suffix: .csv/.jsonl/.parquet with title, body, "
                             "label; .txt fastText `__label__X text`; .json a ccims file, body only, labelled by "
                             "its name; .zip GitHub API issue objects)")


def _evaluate_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", type=Path)
    _format_argument(parser)
    parser.add_argument("--model", help="version to score (default: the one serving --scope)")
    _scope_argument(parser)
    parser.add_argument("--json", action="store_true", help="print one JSON object with every metric")
    parser.add_argument("--confusion-png", type=Path, help="also draw the confusion matrix here")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--target-precision", type=float, default=0.9, help="precision the thresholds aim at")


def _push_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("version")
    parser.add_argument("target", help="hub id owner/name (needs `hf auth login` or HF_TOKEN) or a directory")
    parser.add_argument("--public", action="store_true",
                        help="create the hub repository public (default: private; an existing one keeps its own)")
    parser.add_argument(publish.REPOSITORY_DATA_FLAG, action="store_true",
                        help="with --public: publish a model trained on repositories' issues (a retraining's) "
                             "all the same; its weights can give back their text")


def _pull_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("source", help="hub id owner/name or a directory written by push-model")
    parser.add_argument("--revision", help="hub revision (branch, tag or commit) to pin")
    parser.add_argument("--force", action="store_true", help="promote whatever the scores (admins)")
    parser.add_argument("--trust-pickle", action="store_true",
                        help="accept a hub model's pickled TF-IDF member (it runs code when loaded); weights are "
                             "safetensors only, always")
    _scope_argument(parser)


def _promote_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("version")
    parser.add_argument("--force", action="store_true", help="skip the comparison with the serving model")
    parser.add_argument("--scope", help="scope to serve (default: the version's own)")


# ---- commands ----

def _gc_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--keep", type=int, default=KEEP_PROMOTED,
                        help=f"promoted versions kept per scope, the serving one included (default {KEEP_PROMOTED})")
    parser.add_argument("--dry-run", action="store_true", help="list what would be deleted, delete nothing")


def train_config_from(args: argparse.Namespace, recipe: dict | None = None) -> TrainConfig:
    """TrainConfig defaults, then `recipe`, overridden by the flags given."""
    given = {name: getattr(args, name) for name, _ in TRAIN_FLAGS.values() if getattr(args, name) is not None}
    return TrainConfig(**(recipe or {}) | given)


def train(args: argparse.Namespace, settings: Settings) -> int:
    """`train FILE`: fine-tune, register, and promote when asked."""
    examples = load_file(args.file)
    eval_examples = load_file(args.eval) if args.eval else []
    promote = "gate" if args.promote else "force" if args.force else None
    train_and_register(settings, train_config_from(args), examples, eval_examples, scope=args.scope,
                       promote=promote, trigger="manual", progress=not args.no_progress, data_source=str(args.file))
    return 0


def train_and_register(settings: Settings, config: TrainConfig, examples: Sequence[Example],
                       eval_examples: Sequence[Example], *, scope: str, promote: str | None, trigger: str,
                       progress: bool, data_source: str = "", unseen: Sequence[str] = (),
                       gate_others_later: bool = False) -> str:
    """Train, score on `eval_examples` if any, register (trainer.pipeline); promote ("gate" or "force").

    `unseen`: the held-out issues are these repositories, never trained on (the hub's lesson split): its
    figures are the unseen-repository protocol's, and the card and the listing say so. `gate_others_later`:
    the fast path gates the engine this CPU serves, and the training queue the others (`GATE_PENDING`)."""
    fast_path = FastPathOptions(all_engines=not gate_others_later)
    with open_registry(settings) as registry:
        model, trained, metrics = pipeline.train_and_register(registry, config, examples, scope=scope,
                                                              held_out=eval_examples, evaluate=True,
                                                              progress=progress, fast_path=fast_path)
        steps = f" {trained.steps} steps" if hasattr(trained, "steps") else ""  # TF-IDF alone takes none
        print(f"trained{steps} in {trained.seconds:.0f} s")
        if unseen and metrics:
            metrics = publish.as_unseen(metrics, unseen)
        model = registry.annotate(model, train_data={"source": data_source, "issues": len(examples)},
                                  metrics=metrics or None)
        print(f"registered {model.version} at {model.directory}" + _score_text(metrics))
        if promote:
            held_out = eval_examples or load_database(registry.session, scope)
            run = compare_and_promote(registry, model, held_out, scope=scope, force=promote == "force",
                                      trigger=trigger)
            print(verdict(run))
    if gate_others_later:
        try:
            pending = queue_pending_gates(Redis.from_url(settings.redis_url), model)
        except RedisError as error:  # no queue to hand them to: gated here, as without the flag
            print(f"Redis did not take the other engines' gates ({type(error).__name__}): gating them now")
            issues, source = default_gate_issues()
            gate_pending(model, issues, source=source)
        else:
            if pending:
                print(f"gated the engine this CPU serves; the training worker gates the others ({', '.join(pending)}) "
                      "once the service is up")
    return model.version


def _score_text(metrics: dict) -> str:
    if not metrics:
        return ""
    protocol = "unseen-repository" if metrics.get("protocol") == publish.UNSEEN else "NLBSE"
    return (f": macro-F1 {metrics['macro_f1']:.4f}, "
            f"{protocol} mean-repo macro-F1 {metrics['mean_repo_macro_f1']:.4f}")


def bootstrap_model(args: argparse.Namespace, settings: Settings) -> int:
    """`bootstrap-model`: the first model, from public data, so the bot can label from day one."""
    source = choose_source(args.data, os.environ, revision=args.revision)
    examples, eval_examples, described = load_source(source, seed=args.seed or TrainConfig.seed,
                                                     revision=args.revision, say=print)
    unseen = TEST_REPOS if source == HUB and not args.eval else ()
    if args.eval:
        eval_examples = load_file(args.eval)
    config = train_config_from(args, BOOTSTRAP_RECIPE)
    print(f"bootstrap: fine-tuning {base_model_name(config.resolved_base_model())} on {len(examples)} issues "
          f"from {described} "
          f"({config.epochs} epochs, {config.max_length} tokens, batch {config.batch_size}, lr {config.lr:g}, "
          f"TF-IDF share {config.tfidf_share:g}); held-out: {len(eval_examples)} issues")
    started = time.perf_counter()
    version = train_and_register(settings, config, examples, eval_examples, scope=GLOBAL_SCOPE,
                                 promote="force" if args.force else "gate", trigger="bootstrap",
                                 progress=not args.no_progress, data_source=described, unseen=unseen,
                                 gate_others_later=args.gate_others_later)
    print(f"bootstrap done in {time.perf_counter() - started:.0f} s: {version}")
    return 0


def push_model(args: argparse.Namespace, settings: Settings) -> int:
    """`push-model VERSION TARGET`: the version's directory and a model card, to the hub or a directory."""
    with open_registry(settings) as registry:
        model = registry.model(args.version)
    where = publish.push_model(model.directory, model.card, args.target, private=not args.public,
                               include_repository_data=args.include_repository_data)
    print(f"published {model.version} to {where}")
    return 0


def pull_model(args: argparse.Namespace, settings: Settings) -> int:
    """`pull-model SOURCE`: register a published model, then promote it through the gate (or --force)."""
    directory = publish.pull_model(args.source, revision=args.revision, trust_pickle=args.trust_pickle, say=print)
    with open_registry(settings) as registry:
        examples = load_database(registry.session, args.scope)
        # never the publisher's ONNX graph on its word (its card's gate and hash are the publisher's too): the
        # fast path is built here from the safetensors weights and gated against PyTorch like any registration
        model = pipeline.add_to_registry(registry, directory, scope=args.scope, held_out=examples)
        model = registry.annotate(model, pulled_from=publish.origin(
            args.source, args.revision, downloaded=None if publish.is_local(args.source) else directory))
        print(f"registered {model.version} from {args.source} (fast path: {model.card.fast_path.get('serves')}, "
              "built and gated here)")
        run = compare_and_promote(registry, model, examples, scope=args.scope, force=args.force, trigger="pull")
        print(verdict(run))
    return 0


def select(args: argparse.Namespace, settings: Settings) -> int:
    """`select [FILE] --candidates a,b`: each, and TF-IDF, by the unseen protocol; register the best."""
    from trainer.select import select_encoder

    if args.file:
        sources = {str(args.file): load_file(args.file, format=args.format)}
    else:
        source = choose_source(None, os.environ, hub_reachable=lambda: False, hub_cached=lambda: False)
        sources = load_sources(source) if Path(source).is_dir() else {str(source): load_file(source)}
    with open_registry(settings) as registry:
        names = [name.strip() for name in args.candidates.split(",") if name.strip()]
        selection = select_encoder(names, sources,
                                   train_config_from(args, BOOTSTRAP_RECIPE), folds=args.folds,
                                   budget_minutes=args.budget_minutes, registry=registry, scope=args.scope,
                                   progress=not args.no_progress)
        print(f"unseen repositories, {len(selection.best['metrics']['folds'])} folds; "
              f"budget {args.budget_minutes:g} CPU minutes on the whole mix")
        width = max(len("candidate"), *(len(row["candidate"]) for row in selection.rows))
        print(f"{'candidate':<{width}} {'repo-mean':>9} {'macro-F1':>9} {'folds s':>8} {'whole min':>9} "
              f"{'issues/s':>9}")
        for row in selection.rows:
            over = (f"  TF-IDF share {row['tfidf_share']:g}" if row["kind"] == "blend" else "") + (
                "" if row["within_budget"] else "  over budget")
            print(f"{row['candidate']:<{width}} {row['mean_repo_macro_f1']:>9.4f} {row['macro_f1']:>9.4f} "
                  f"{row['train_seconds']:>8.1f} {row['whole_mix_minutes']:>9.1f} {row['issues_per_second']:>9.1f}"
                  f"{over}")
            if row["kind"] == "blend":  # what each share would score, so a maintainer can weigh another
                print(f"{'':<{width}}   by TF-IDF share: "
                      + ", ".join(f"{share:g} {value:.3f}" for share, value in row["share_curve"].items()))
        print(f"best: {selection.best['candidate']}, registered as {selection.registered.version}; "
              f"serve it with `issue-sorter promote {selection.registered.version}`")
    return 0


def evaluate(args: argparse.Namespace, settings: Settings) -> int:
    """`evaluate FILE`: every metric of a registered model on a labelled file, run as a worker here would
    run it (ISSUE_SORTER_ENGINE included)."""
    examples = load_file(args.file, format=args.format)
    with open_registry(settings) as registry:
        classifier = registry.load(args.model, scope=args.scope, engine=settings.engine)
    result = evaluate_classifier(classifier, examples, batch_size=args.batch_size,
                                 target_precision=args.target_precision)
    result["engine"] = served_engine(classifier)  # what ran the encoder here (None: TF-IDF alone)
    if args.confusion_png:
        plot_confusion(result["confusion"], result["labels"], args.confusion_png)
    if args.json:
        print(json.dumps(result))
        return 0
    engine = f" on {result['engine']}" if result["engine"] else ""
    print(f"{classifier.version}{engine}: {result['n_scored']} scored, {result['n_skipped']} skipped "
          f"(labels it does not know: {result['skipped_labels']}){_score_text(result)}")
    for label, row in result["per_label"].items():
        print(f"  {label:<20} P {row['precision']:.3f}  R {row['recall']:.3f}  F1 {row['f1']:.3f}  "
              f"n {row['support']}")
    for repo, row in result["per_repo"].items():
        print(f"  {repo:<30} macro-F1 {row['macro_f1']:.4f}  n {row['n']}")
    return 0


def models(args: argparse.Namespace, settings: Settings) -> int:
    """`models`: every registered version with its registration's macro-F1 and per-repository mean macro-F1
    (the quality and operator pages' figures); * marks the one serving its scope."""
    with open_registry(settings) as registry:
        rows = registry.list()
        serving = {scope: registry.serving(scope) for scope in {row.scope for row in rows}}
        for row in rows:
            mark = "*" if serving[row.scope] is not None and serving[row.scope].id == row.id else " "
            print(f"{mark} {row.version:<45} {row.scope:<25} {row.base_model[-40:]:<40} "
                  f"macro-F1 {_figure(row.metrics.get('macro_f1'))}  "
                  f"per-repository mean {_figure(row.metrics.get('mean_repo_macro_f1'))}")
        if not rows:
            print("no models registered: run `issue-sorter bootstrap-model`")
    return 0


def _figure(score: float | None) -> str:
    # the quality page and the operator page show the same figures, to 3 places, under the same names
    return "-" if score is None else f"{score:.3f}"


def promote(args: argparse.Namespace, settings: Settings) -> int:
    """`promote VERSION`: through the gate on the scope's human-confirmed issues, or --force."""
    with open_registry(settings) as registry:
        challenger = registry.model(args.version, scope=args.scope)
        scope = args.scope or challenger.row.scope
        run = compare_and_promote(registry, challenger, load_database(registry.session, scope), scope=scope,
                                  force=args.force, trigger="manual")
        print(verdict(run))
    return 0 if run.promoted else 1


def convert_tfidf(args: argparse.Namespace, settings: Settings) -> int:
    """`convert-tfidf [VERSION...]`: no pickle left to load in the registry's directories."""
    from trainer.baseline import convert_pickled

    with open_registry(settings) as registry:
        rows = [registry.get(version) for version in args.versions] if args.versions else registry.list()
        paths = [Path(row.path) for row in rows if Path(row.path).is_dir()]
    converted = [directory for path in paths for directory in convert_pickled(path)]
    return _listed([f"converted {directory}" for directory in converted],
                   f"{len(converted)} pickled TF-IDF models converted")


def gc_models(args: argparse.Namespace, settings: Settings) -> int:
    """`gc-models`: what serves and what a rollback may need stays; the rows stay as history."""
    with open_registry(settings) as registry:
        deleted = registry.collect_garbage(keep_promoted=args.keep, dry_run=args.dry_run)
    verb = "would delete" if args.dry_run else "deleted"
    return _listed([f"{verb} {row.version} ({row.scope}): {row.path}" for row in deleted],
                   f"{len(deleted)} model versions {'to delete' if args.dry_run else 'deleted'}")


def _listed(lines: list[str], summary: str) -> int:
    """Print what a command did, one line each, then the count; exit code 0."""
    print("\n".join([*lines, summary]))
    return 0


def rollback(args: argparse.Namespace, settings: Settings) -> int:
    """`rollback`: the previous version serves the scope again."""
    with open_registry(settings) as registry:
        promotion = registry.rollback(args.scope)
        print(f"{args.scope} now served by {promotion.model_version.version} ({promotion.reason})")
    return 0
