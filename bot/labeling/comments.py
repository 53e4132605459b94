"""What the bot says on an issue: the comment of comment mode, the suggestions of suggest mode, and the
report about a broken config file. Pure text; every label name and quoted value in it is a code span, so
no comment can mention anyone. Each carries a hidden marker, so the bot can find its own comments.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from bot.labeling.markdown import code_span

MARKER = "<!-- issue-sorter -->"
CONFIG_MARKER = "<!-- issue-sorter:config -->"
DEFAULT_COMMENT = (f"{MARKER}\nIssue Sorter labelled this issue {{label}} ({{score:.0%}} sure). "
                   "If that is wrong, change the label: the bot learns from it.")
SUGGEST_COMMENT = f"{MARKER}\nIssue Sorter's suggestions for this issue:\n\n{{suggestions}}"
MAX_SIMILAR = 3  # the most similar confirmed issues a default comment links to
MAX_REPORTED = 10  # problems listed in a config report; the rest are counted
CONFIG_WARNED_KEY = "issue-sorter:config-warned:{}:{}"  # repo, digest of the report: one comment a day
CONFIG_WARNING_SECONDS = 86400


def label_comment(label: str, score: float, scores: dict[str, float], template: str | None = None,
                  similar: Sequence[int] = (), own: Sequence[str] = ()) -> str:
    """The comment of comment mode, after labelling; the default one names the repository's `own` labels
    applied beside the kind and links the most `similar` confirmed issues (a repository's own template
    says only what it says: {own_labels} names them there)."""
    text = (template or DEFAULT_COMMENT).format(label=code_span(label), score=score,
                                                suggestions=suggestion_lines(scores),
                                                own_labels=own_label_list(own))
    return text if template else text + own_applied_line(own) + similar_line(similar)


def suggestion_comment(scores: dict[str, float], template: str | None = None,
                       similar: Sequence[int] = (), own: Sequence[tuple[str, float]] = ()) -> str:
    """The comment of suggest mode: the top kinds with their scores (and, by default, the repository's own
    labels that may fit and similar issues; a template's {own_labels} names those labels)."""
    top, score = max(scores.items(), key=lambda item: item[1])
    text = (template or SUGGEST_COMMENT).format(label=code_span(top), score=score,
                                                suggestions=suggestion_lines(scores),
                                                own_labels=own_label_list([label for label, _ in own]))
    return text if template else text + own_suggested_lines(own) + similar_line(similar)


def own_label_list(labels: Sequence[str]) -> str:
    """A template's {own_labels}: "`streaming`, `vision`", or "none"."""
    return ", ".join(code_span(label) for label in labels) if labels else "none"


def own_applied_line(labels: Sequence[str]) -> str:
    """"Also labelled `streaming`, `vision`: ...", or nothing."""
    if not labels:
        return ""
    return (f"\n\nAlso labelled {', '.join(code_span(label) for label in labels)}, as learnt from this "
            "repository's confirmed issues that carry them.")


def own_suggested_lines(own: Sequence[tuple[str, float]]) -> str:
    """The repository's own labels that may fit, with their scores (each label's probability by its head,
    core.own_labels.heads), or nothing."""
    if not own:
        return ""
    return "\n\nThis repository's labels that may fit:\n" + "\n".join(
        f"- {code_span(label)}: {score:.0%}" for label, score in own)


def similar_line(numbers: Sequence[int]) -> str:
    """"Similar confirmed issues: #12, #7." (GitHub links each number in the repository), or nothing."""
    kept = list(dict.fromkeys(int(number) for number in numbers))[:MAX_SIMILAR]
    return f"\n\nSimilar confirmed issues: {', '.join(f'#{number}' for number in kept)}." if kept else ""


def suggestion_lines(scores: dict[str, float], n: int = 3) -> str:
    ranked = sorted(scores.items(), key=lambda item: -item[1])[:n]
    return "\n".join(f"- {code_span(label)}: {score:.0%}" for label, score in ranked)


def problem_report(source: str, problems: tuple[str, ...] | list[str], *, held: bool) -> str:
    """The message about a broken config file, for the log and for the issue."""
    where = code_span(source)
    head = (f"Issue Sorter applies nothing on this repository until {where} is fixed:" if held
            else f"Issue Sorter ignores these settings of {where} and uses its defaults for them:")
    lines = [f"- {problem}" for problem in problems[:MAX_REPORTED]]
    if len(problems) > MAX_REPORTED:
        lines.append(f"- and {len(problems) - MAX_REPORTED} more")
    return "\n".join([head, *lines])


def config_warning_key(repo: str, report: str) -> str:
    """Redis key that makes one report a day per repository (the same problems, the same key)."""
    return CONFIG_WARNED_KEY.format(repo, hashlib.sha256(report.encode()).hexdigest()[:16])


def decision_marker(prediction_id: int) -> str:
    """The hidden mark of the comment that carries one stored decision: a retry finds it on the issue."""
    return f"<!-- issue-sorter:prediction:{int(prediction_id)} -->"
