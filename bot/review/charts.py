"""The quality page's pictures, drawn on the server as PNG with matplotlib's object API (no pyplot: no global
state shared between requests)."""

from __future__ import annotations

import io
from collections import Counter
from collections.abc import Sequence

from bot.review.quality import MIN_WEEK_DECISIONS, ModelRow, Week
from core.plots import confusion_figure

BLUE, GREEN, AMBER, GREY = "#0969da", "#1a7f37", "#bf8700", "#8c959f"


def _png(figure) -> bytes:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=100)
    return buffer.getvalue()


def _axes(width: float = 7.0, height: float = 3.2):
    """The one plot of a new figure (`axes.figure`), with a light grid."""
    from matplotlib.figure import Figure

    axes = Figure(figsize=(width, height), layout="constrained").add_subplot()
    axes.grid(alpha=0.3)
    return axes


def _nothing(message: str, width: float = 7.0, height: float = 3.2) -> bytes:
    """A picture that says there is nothing to draw yet."""
    axes = _axes(width, height)
    axes.text(0.5, 0.5, message, ha="center", va="center", color=GREY)
    axes.set_axis_off()
    return _png(axes.figure)


def weekly_quality(weeks: Sequence[Week]) -> bytes:
    """Coverage (labelled share) and live precision (kept share of judged labels), week by week."""
    if not weeks:
        return _nothing("no predictions yet")
    axes = _axes()
    labels = [week.start.strftime("%b %d") for week in weeks]
    axes.plot(labels, [w.coverage for w in weeks], marker="o", color=BLUE, label="coverage: issues labelled")
    precision = [(label, w.precision) for label, w in zip(labels, weeks, strict=True) if w.precision is not None]
    if precision:
        axes.plot(*zip(*precision, strict=True), color=GREEN, label="precision: labels kept")
        # a week of a few decisions is drawn hollow: its precision is mostly noise
        for hollow in (False, True):
            points = [(label, w.precision) for label, w in zip(labels, weeks, strict=True)
                      if w.precision is not None and w.few == hollow]
            if points:
                axes.plot(*zip(*points, strict=True), linestyle="none", marker="s", color=GREEN,
                          markerfacecolor="white" if hollow else GREEN,
                          label=f"fewer than {MIN_WEEK_DECISIONS} decisions" if hollow else None)
    axes.set_ylim(0, 1.05)
    axes.set_ylabel("share")
    axes.set_title("Per week (weeks starting on)")
    axes.legend(loc="lower left", fontsize=8)
    axes.tick_params(axis="x", labelrotation=30, labelsize=8)
    return _png(axes.figure)


def decisions_matrix(pairs: Sequence[tuple[str, str]]) -> bytes:
    """Humans' decisions (rows) against the bot's predictions (columns), counts and shares of each row."""
    kinds = sorted({kind for pair in pairs for kind in pair})
    if not kinds:
        return _nothing("no human decision yet", 5.0, 4.0)
    counts = Counter((truth, predicted) for predicted, truth in pairs)
    matrix = [[counts[(truth, predicted)] for predicted in kinds] for truth in kinds]
    return _png(confusion_figure(matrix, kinds, xlabel="the bot predicted", ylabel="maintainers confirmed"))


def model_history(rows: Sequence[ModelRow]) -> bytes:
    """Each model's score when it was registered, in time order; the serving one marked."""
    scored = [row for row in rows if row.macro_f1 is not None]  # the table's macro-F1, never another figure
    if not scored:
        return _nothing("no scored model yet")
    axes = _axes()
    for index, row in enumerate(scored):
        score = row.macro_f1
        color = GREEN if row.serving else (AMBER if row.scope != "global" else BLUE)
        axes.scatter([index], [score], color=color, s=80 if row.serving else 40, zorder=3)
        if row.unseen is not None:
            axes.scatter([index], [row.unseen], color=color, marker="x", zorder=3)
    axes.set_xticks(range(len(scored)), [row.version[-15:] for row in scored], rotation=30, ha="right", fontsize=7)
    axes.set_ylim(0, 1)
    axes.set_ylabel("macro-F1 at registration\n(x: unseen repositories, per-repo mean)")
    axes.set_title("Models (green: serving, blue: global, amber: this repository's)")
    return _png(axes.figure)


def backtest_curve(report: dict | None) -> bytes:
    """The dry run on the repository's history (bot.labeling.backtest): per window of issues in time order, the
    share the App would have labelled and the precision of those labels; the target dashed."""
    if not report or not report.get("curve"):
        return _nothing("no dry run yet")
    axes = _axes()
    seen = [point["seen"] + point["issues"] for point in report["curve"]]
    axes.plot(seen, [point["coverage"] for point in report["curve"]], marker="o", color=BLUE,
              label="labelled: share of the window's issues")
    precision = [(x, point["precision"]) for x, point in zip(seen, report["curve"], strict=True)
                 if point["precision"] is not None]
    if precision:
        axes.plot(*zip(*precision, strict=True), marker="s", color=GREEN, label="precision: labels right")
    target = (report.get("config") or {}).get("target_precision")
    if target:
        axes.axhline(target, color=AMBER, linestyle="--", linewidth=1, label=f"target {target:.0%}")
    axes.set_ylim(0, 1.05)
    axes.set_xlabel(f"issues replayed, in time order (windows of {report['window']})")
    axes.set_ylabel("share")
    axes.set_title(f"Dry run on {report['repo']}'s history")
    axes.legend(loc="lower right", fontsize=8)
    return _png(axes.figure)
