"""`issue-sorter backtest owner/name`: a dry run on a repository's own history before the App writes there: its
labelled issues, read from GitHub as the backfill reads them, replayed in time order through the App's decision
(bot.labeling.backtest), and what it would have done: how many labelled, how right per kind and per own label,
what it would have abstained on; a JSON report and a plot under --out. Nothing is written to GitHub or stored."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from core.db import make_sessionmaker, session_scope
from core.settings import Settings
from issue_sorter.command import add


def add_commands(commands) -> None:
    backtest = add(commands, "backtest", cmd_backtest,
                   "replay a repository's labelled issues through the App's decision, writing nothing: how many "
                   "it would label, how right, and what it would abstain on")
    backtest.add_argument("repo", help="owner/name, where the App is installed")
    backtest.add_argument("--history", type=int, default=0, metavar="N",
                          help="the oldest N issues are the repository's history when the App is installed: in its "
                               "memory from the start, not decided (default 0: every issue decided)")
    backtest.add_argument("--max-issues", type=int, default=1000, help="the newest issues read at most (the "
                                                                       "backfill's bound)")
    backtest.add_argument("--window", type=int, help="issues per point of the plot (default: a twentieth)")
    backtest.add_argument("--out", type=Path, default=Path("var/backtest"), help="where the report and plot go")
    backtest.add_argument("--json", action="store_true", help="print the report as JSON")


def cmd_backtest(args: argparse.Namespace, settings: Settings) -> int:
    from bot.github_api.client import GitHubApp, GitHubError
    from bot.labeling.backtest import Remembering, backtest, labelled_history
    from core import store
    from core.classifier import load_classifier

    if settings.dry_run:
        raise SystemExit("backtest reads the repository from GitHub as the App: set GITHUB_APP_ID and "
                         "GITHUB_PRIVATE_KEY")
    with session_scope(make_sessionmaker(settings.database_url)) as session:
        serving = store.serving_model_for(session, args.repo)
        model_path = serving.path if serving is not None else None
    if model_path is None:
        raise SystemExit("backtest: no model is promoted: run `issue-sorter bootstrap-model`")
    app = GitHubApp.from_settings(settings)
    try:
        installation_id = app.repository_installation(args.repo)
        if installation_id is None:
            raise SystemExit(f"backtest: the App is not installed on {args.repo}; install it there first (it "
                             "writes nothing until an issue is opened, and `mode: shadow` writes nothing at all)")
        github = app.writer_for(installation_id)
        issues = labelled_history(github, args.repo, args.max_issues)
        if len(issues) <= args.history or len(issues) < 2:
            raise SystemExit(f"backtest: {args.repo} has {len(issues)} labelled issues: too few to replay"
                             + (f" after --history {args.history}" if args.history else ""))
        classifier = load_classifier(model_path, threads=settings.worker_threads, engine=settings.engine)
        with _progress(not args.json) as progress:
            result = backtest(issues, repo=args.repo, classifier=classifier, settings=settings,
                              github=Remembering(github), history=args.history, window=args.window,
                              progress=progress)
    except GitHubError as error:
        raise SystemExit(f"backtest: GitHub did not answer for {args.repo}: {error}") from None
    report_path, plot_path = write_report(result, args.out)
    print(json.dumps(result) if args.json else f"{describe(result)}\nreport: {report_path}, plot: {plot_path}")
    return 0


class _progress:
    """A progress bar per stage (scoring, replaying) on stderr, or none."""

    def __init__(self, shown: bool):
        self.shown, self.bar, self.stage = shown, None, None

    def __enter__(self):
        return self.update

    def update(self, stage: str, done: int, total: int) -> None:
        from tqdm import tqdm

        if not self.shown:
            return
        if stage != self.stage:
            self.__exit__()
            self.stage, self.bar = stage, tqdm(total=total, desc=stage, unit="issue")
        self.bar.n = done
        self.bar.refresh()

    def __exit__(self, *exc_info) -> None:
        if self.bar is not None:
            self.bar.close()


def write_report(result: dict, out: Path) -> tuple[Path, Path]:
    """The report as JSON and its plot as PNG, named after the repository, in `out`."""
    from bot.review.charts import backtest_curve

    out.mkdir(parents=True, exist_ok=True)
    stem = result["repo"].replace("/", "-")
    report_path, plot_path = out / f"{stem}-backtest.json", out / f"{stem}-backtest.png"
    report_path.write_text(json.dumps(result, indent=2) + "\n")
    plot_path.write_bytes(backtest_curve(result))
    return report_path, plot_path


def describe(result: dict) -> str:
    """The report in a few lines."""
    def pct(share):
        return f"{share:.0%}" if share is not None else "–"

    config = result["config"]
    lines = [f"{result['repo']}: {result['issues']} labelled issues replayed in time order through {result['model']}"
             + (f", after {result['history']} as its history at install" if result["history"] else "")
             + f"; config: {config['source']}"]
    if config["held"]:
        lines.append(f"HELD: {config['held']}")
    target = f" (target {pct(config['target_precision'])})" if config["target_precision"] else ""
    lines.append(f"it would have labelled {result['labelled']} of {result['issues']} issues "
                 f"({pct(result['coverage'])}),"
                 f" {pct(result['precision'])} of them right{target}; abstained on {result['abstained']['issues']}")
    lines.append(f"{'kind':<16}{'issues':>8}{'labelled':>10}{'precision':>11}{'recall':>8}")
    for kind, row in result["per_kind"].items():
        lines.append(f"{kind:<16}{row['issues']:>8}{row['labelled']:>10}{pct(row['precision']):>11}"
                     f"{pct(row['recall']):>8}")
    for name, row in result["own_labels"].items():
        lines.append(f"own label {name}: on {row['issues']} issues, applied {row['applied']}, precision "
                     f"{pct(row['precision'])}, recall {pct(row['recall'])}")
    if result["abstained"]["issues"]:
        lines.append("abstained on: " + ", ".join(f"{count} {kind}" for kind, count in
                                                 result["abstained"]["by_kind"].items()))
        for step in result["abstained"]["examples"][-5:]:
            below = f" below {step['threshold']:.2f}" if step["threshold"] is not None else ""
            lines.append(f"  #{step['number']} {step['title'][:70]} ({step['predicted']} {step['score']:.2f}{below}; "
                         f"maintainers: {step['truth'] or 'no kind'})")
    if result["thresholds"]:
        lines.append("thresholds it would serve now: " + ", ".join(
            f"{kind} {row['threshold']:.2f} ({row['source']}, {row['support']} judged)"
            for kind, row in result["thresholds"].items()))
    return "\n".join(lines)
