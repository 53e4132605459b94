"""Per-repository settings from `.github/issue-sorter.yml` (or the org's `.github` repository).

Parsing is pure and bounded: text in, a RepoConfig and a list of problems out, in time linear in the file,
which is capped at 64 KiB and may use no YAML anchors or aliases. A broken setting is dropped and the
others are kept. When the file cannot be parsed or cannot be read at all (GitHub refuses it, or the path is a
folder), or a setting that restrains the bot (`GUARDS`) is broken, the config is *held*: the bot records its
prediction as `held` and applies nothing on the repository until the file is fixed; the reason says how.
No file at all, neither the repository's nor its organisation's, means the defaults. The labelling job reads
the file (bot.labeling.gather) and reports the problems (bot.labeling.comments: every value quoted in them is a
short code span, so a file can ping nobody); `issue-sorter check-config` reads it the same way.
"""

from __future__ import annotations

import difflib
import functools
import re
import reprlib
import string
from collections.abc import Callable
from dataclasses import dataclass, field

import yaml
from yaml.composer import ComposerError

from bot.github_api.client import MAX_CONFIG_BYTES, NotAFile, PermanentGitHubError, RepoFile
from bot.labeling.markdown import code_span
from core.kinds import KINDS
from core.own_labels import DEFAULT_MIN_EXAMPLES
from core.own_labels.candidates import MAX_AREAS
from core.thresholds import DEFAULT_TARGET_PRECISION

CONFIG_PATH = ".github/issue-sorter.yml"
MODES = ("label", "comment", "suggest", "shadow", "off")  # shadow: classify and record, write nothing
APPLY = ("label", "type", "both")  # what the predicted kind sets: a label, the issue type, or both
# Broken, they would let the bot do what they forbid. abstain_label is not one: it only adds a label, so a
# broken one is dropped (the App's ISSUE_SORTER_ABSTAIN_LABEL applies) and reported like any other.
GUARDS = ("mode", "apply", "labels", "allow", "skip_authors")
MAX_LABEL_CHARS = 50  # GitHub refuses longer label names
TOO_LARGE = f"{{}} is larger than {MAX_CONFIG_BYTES // 1024} KiB"
MAX_DEPTH = 8  # YAML nesting; the deepest setting needs 3, and the composer recurses once per level
MAX_TEMPLATE_CHARS = 4000
MAX_TEMPLATE_FIELDS = 20  # with short specs this keeps a comment far below GitHub's 65536 characters
MAX_SPEC_CHARS = 10
LONG_NUMBER = re.compile(r"\d{4}")  # a width or precision of 4+ digits ("{score:>999999999}") is refused
TEMPLATE_SAMPLES = {"label": "`bug`", "score": 0.9, "suggestions": "- `bug`: 90%",  # the types at format time
                    "own_labels": "`streaming`"}


class _ShortRepr(reprlib.Repr):
    """reprlib's bounded repr, which also bounds ints."""

    def repr_int(self, x: int, level: int) -> str:
        if x.bit_length() > 128:  # "1:2:3:…" is a base-60 int of any size; repr refuses 4300+ digits
            return f"<a {x.bit_length()}-bit number>"
        return super().repr_int(x, level)


_short = _ShortRepr()
_short.maxstring = _short.maxother = _short.maxlong = 40
_short.maxlist = _short.maxtuple = _short.maxdict = _short.maxset = 4
_short.maxlevel = 2
_short_key = _ShortRepr()  # an unknown key is named beside the list of known ones: shorter still
_short_key.maxstring = _short_key.maxother = 20


@dataclass(frozen=True)
class RepoConfig:
    mode: str = "label"  # label | comment (label + a comment) | suggest (comment only) | off
    apply: str = "label"  # label | type (the organisation's issue type) | both
    labels: dict[str, str] = field(default_factory=dict)  # kind → this repository's label (or issue type) name
    allow: tuple[str, ...] = ()  # when set, only these labels are ever applied
    threshold: float | None = None  # overrides ISSUE_SORTER_THRESHOLD
    # per-kind thresholds that keep this share of applied labels right (core.thresholds); None: off
    target_precision: float | None = DEFAULT_TARGET_PRECISION
    comment_template: str | None = None  # {label}, {score}, {suggestions}, {own_labels}
    skip_authors: tuple[str, ...] = ()  # e.g. dependabot[bot]
    abstain_label: str | None = None  # put on issues the bot abstains on; "" (false): none; None: the App's
    remove_abstain_label: bool = True  # the abstain label comes off when a maintainer decides the kind
    # the repository's own labels beside the kind (core.own_labels): None every candidate, () none (off),
    # else names and prefixes (`module:`); a broken value turns them off, never widens them
    areas: tuple[str, ...] | None = None
    # own labels are written only where the file sets `areas` (a list, or true): without it they are only
    # suggestions on the review page, since a label the App writes runs the repository's `labeled` workflows
    write_own_labels: bool = False
    min_examples: int = DEFAULT_MIN_EXAMPLES  # confirmed examples before an own label is applied
    source: str = "defaults"  # where it came from, for logs
    held: str | None = None  # why nothing may be applied here: the file, or one of its GUARDS, is broken


def describe(value: object) -> str:
    """A value from a config file for a problem message: a short repr in a code span, never the whole."""
    return code_span(_short.repr(value))


# ---- parsing -----------------------------------------------------------------------------------------

def parse_config(text: str | None, source: str = CONFIG_PATH) -> tuple[RepoConfig, list[str]]:
    """(config, problems): every valid setting is kept; a broken file or guard holds the config."""
    if text is None:
        return RepoConfig(), []
    if len(text.encode("utf-8", "surrogatepass")) > MAX_CONFIG_BYTES:
        return _unusable(source, TOO_LARGE.format(source))
    data, problem = _load_yaml(text, source)
    if problem:
        return _unusable(source, problem)
    if data is None:
        return RepoConfig(source=source), []
    values: dict = {}
    problems: list[str] = []
    broken: list[str] = []
    for key, value in data.items():
        check = CHECKS.get(key) if isinstance(key, str) else None
        parsed, problem = check(key, value) if check else (None, _unknown_setting(key))
        if problem is None:
            values[key] = parsed
            continue
        problems.append(problem)
        if key in GUARDS or _meant_guard(key, data):
            broken.append(problem)
    if "areas" in data and "areas" not in values:
        values["areas"] = ()  # a broken list of areas could take labels the maintainer left out: off instead
    values["write_own_labels"] = values.get("areas", ()) != ()
    if "threshold" in values and "target_precision" not in values:  # a threshold set alone is meant flat
        values["target_precision"] = None
    held = _held_reason(source, broken) if broken else None
    return RepoConfig(source=source, held=held, **values), problems


@functools.lru_cache(maxsize=256)
def parse_file(file: RepoFile, source: str) -> tuple[RepoConfig, tuple[str, ...]]:
    """parse_config of a file from GitHub, cached by its blob SHA: an unchanged file is parsed once."""
    text, problem = None, TOO_LARGE.format(source)
    if file.content is not None and file.size <= MAX_CONFIG_BYTES:
        try:
            text, problem = file.content.decode("utf-8"), None
        except UnicodeDecodeError as error:
            problem = f"{source} is not UTF-8 text (byte {error.start})"
    config, problems = _unusable(source, problem) if problem else parse_config(text, source)
    return config, tuple(problems)


class _BoundedLoader(yaml.SafeLoader):
    """SafeLoader without anchors or aliases (650 bytes of them expand to gigabytes) or deep nesting."""

    depth = 0

    def compose_node(self, parent, index):
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None) is not None:
            raise ComposerError(None, None, "anchors and aliases (&name, *name) are not allowed",
                                event.start_mark)
        if self.depth >= MAX_DEPTH:
            raise ComposerError(None, None, f"nesting deeper than {MAX_DEPTH} levels", event.start_mark)
        self.depth += 1
        try:
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1


def _load_yaml(text: str, source: str) -> tuple[object, str | None]:
    try:
        data = yaml.load(text, Loader=_BoundedLoader)  # a SafeLoader, with less
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        what = getattr(error, "problem", None) or str(error).splitlines()[0]
        return None, f"{source} is not valid YAML{where}: {code_span(_shorten(what))}"
    except (ValueError, OverflowError) as error:
        # PyYAML builds values with Python's own types, which refuse "2024-13-45", a 5000-digit int or a
        # base-60 float ("1:2:…:3.5") too big for a float
        return None, f"{source} has a value YAML cannot build: {code_span(_shorten(str(error)))}"
    if data is not None and not isinstance(data, dict):
        return None, f"{source} must be a mapping of settings, not {type(data).__name__}"
    return data, None


def _shorten(text: str, limit: int = 100) -> str:
    return text if len(text) <= limit else text[:limit - 1] + "…"


def _unusable(source: str, problem: str) -> tuple[RepoConfig, list[str]]:
    return RepoConfig(source=source, held=_held_reason(source, [problem])), [problem]


def _held_reason(source: str, broken: list[str]) -> str:
    more = f" (and {len(broken) - 1} more)" if len(broken) > 1 else ""
    return f"{source} is broken, so nothing is applied until it is fixed: {broken[0]}{more}"


def _meant(key: object) -> str | None:
    """The known setting an unknown key most likely misspells ("alow", "Allow", "thresold"), if any."""
    guesses = difflib.get_close_matches(key.lower(), CHECKS, n=1) if isinstance(key, str) else []
    return guesses[0] if guesses else None


def _unknown_setting(key: object) -> str:
    meant = _meant(key)
    hint = f"did you mean {code_span(meant)}?" if meant else f"known: {', '.join(sorted(CHECKS))}"
    return f"unknown setting {code_span(_short_key.repr(key))} ({hint})"


def _meant_guard(key: object, data: dict) -> bool:
    """A misspelt guard is a broken guard, unless the file sets the guard itself too."""
    meant = None if key in CHECKS else _meant(key)
    return meant in GUARDS and meant not in data


# ---- one check per setting: (key, value) → (parsed value, None) or (None, problem) -----------------------

def _one_of(choices: tuple[str, ...]) -> Callable[[str, object], tuple[object, str | None]]:
    """The check of a setting that names one of `choices` (mode, apply)."""
    def check(key: str, value: object) -> tuple[object, str | None]:
        chosen = "off" if value is False else value  # YAML 1.1 reads bare off as false (mode: off)
        if isinstance(chosen, str) and chosen in choices:
            return chosen, None
        return None, f"{key} must be one of {', '.join(choices)}, not {describe(value)}"
    return check


def _labels(key: str, value: object) -> tuple[object, str | None]:
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        return None, "labels must map kinds (bug, feature, question, docs) to label names"
    unknown = [kind for kind in value if kind not in KINDS]
    if unknown:
        return None, f"labels: unknown kind {describe(unknown[0])} (kinds: {', '.join(KINDS)})"
    return dict(value), None


def _names(key: str, value: object) -> tuple[object, str | None]:
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return tuple(value), None
    return None, f"{key} must be a list of names, not {describe(value)}"


def _fraction(key: str, value: object) -> tuple[object, str | None]:
    if isinstance(value, (int, float)) and not isinstance(value, bool) and 0 <= value <= 1:
        return float(value), None
    return None, f"{key} must be a number between 0 and 1, not {describe(value)}"


def _target_precision(key: str, value: object) -> tuple[object, str | None]:
    if value is False or value in ("off", "false"):  # YAML 1.1 reads bare off and false as false
        return None, None
    if isinstance(value, (int, float)) and not isinstance(value, bool) and 0 < value <= 1:
        return float(value), None
    return None, (f"{key} must be a number between 0 and 1 (above 0: the share of applied labels that must "
                  f"be right), or off, not {describe(value)}")


def _template(key: str, value: object) -> tuple[object, str | None]:
    if not isinstance(value, str):
        return None, f"comment_template must be text, not {type(value).__name__}"
    problem = template_problem(value)
    return (None, f"comment_template: {problem}") if problem else (value, None)


def _label_name(key: str, value: object) -> tuple[object, str | None]:
    if value is False or value is None:  # `abstain_label: false` (or empty) turns the App's default off
        return "", None
    if isinstance(value, str) and value.strip() == value and 0 < len(value) <= MAX_LABEL_CHARS:
        return value, None
    return None, (f"{key} must be a label name of 1 to {MAX_LABEL_CHARS} characters without surrounding "
                  f"spaces, or false, not {describe(value)}")


def _boolean(key: str, value: object) -> tuple[object, str | None]:
    if isinstance(value, bool):
        return value, None
    return None, f"{key} must be true or false, not {describe(value)}"


def _areas(key: str, value: object) -> tuple[object, str | None]:
    if value is False or value is None:  # `areas: false` (or empty): no own labels
        return (), None
    if value is True:
        return None, None
    if isinstance(value, list) and len(value) > MAX_AREAS:
        return (), (f"areas lists {len(value)} entries, at most {MAX_AREAS}: name the areas the App may write, "
                    "or their common prefixes (`area/`); own labels are off until it is fixed")
    if isinstance(value, list) and all(isinstance(item, str) and 0 < len(item.strip()) <= MAX_LABEL_CHARS
                                       for item in value):
        return tuple(item.strip() for item in value), None
    return (), (f"areas must be a list of label names or prefixes (such as `module:`), true or false, not "
                f"{describe(value)}; own labels are off until it is fixed")


def _min_examples(key: str, value: object) -> tuple[object, str | None]:
    if isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= 10_000:
        return value, None
    return None, (f"min_examples must be a whole number from 1 to 10000 (confirmed issues before an own "
                  f"label is applied), not {describe(value)}")


# every setting the file may hold, in the order `issue-sorter check-config` shows them
CHECKS = {"mode": _one_of(MODES), "apply": _one_of(APPLY), "labels": _labels, "allow": _names, "threshold": _fraction,
          "target_precision": _target_precision, "comment_template": _template, "skip_authors": _names,
          "abstain_label": _label_name, "remove_abstain_label": _boolean, "areas": _areas,
          "min_examples": _min_examples}


def template_problem(template: str) -> str | None:
    """What is wrong with a comment template, or None: fields {label}, {score}, {suggestions} and
    {own_labels} only, each with no attribute, index or conversion and a short format; checked by parsing,
    in linear time."""
    if len(template) > MAX_TEMPLATE_CHARS:
        return f"longer than {MAX_TEMPLATE_CHARS} characters"
    try:
        fields = [(name, spec, conversion) for _, name, spec, conversion in string.Formatter().parse(template)
                  if name is not None]
    except ValueError as error:  # "Sorted as {": unbalanced braces
        return f"not a format string ({error})"
    if len(fields) > MAX_TEMPLATE_FIELDS:
        return f"more than {MAX_TEMPLATE_FIELDS} fields"
    for name, spec, conversion in fields:
        if name not in TEMPLATE_SAMPLES:  # also "{label.upper}", "{label[2]}", "{0}" and "{}"
            return (f"unknown field {describe(name)}: use only {{label}}, {{score}}, {{suggestions}} and "
                    "{own_labels}")
        if conversion is not None:
            return f"{{{name}}} takes no conversion such as !r or !s"
        if len(spec) > MAX_SPEC_CHARS or "{" in spec or LONG_NUMBER.search(spec):
            return f"the format of {{{name}}} must be at most {MAX_SPEC_CHARS} characters, widths 3 digits"
        try:
            format(TEMPLATE_SAMPLES[name], spec)
        except ValueError:  # "{score:d}", "{label:.2f}"
            return f"{describe(spec)} is not a format for {{{name}}}"
    return None


def load_config(read_file: Callable[[str, str], RepoFile | None] | None, repo: str
                ) -> tuple[RepoConfig, tuple[str, ...]]:
    """The repository's file, else its organisation's `.github` repository's, else the defaults; parsed.
    `read_file(repo, path)` is GitHub's contents API (None in dry-run, which reads nothing): None for a
    missing file (or a repository the installation cannot see), which falls through to the next place. A
    file GitHub refuses, or a folder where the file belongs, holds the repository: its maintainers meant a
    config, and the defaults could apply what it forbids (Probot's config loader fails there too)."""
    if read_file is None:
        return RepoConfig(source="the defaults: dry-run reads no config file"), ()
    for owner in config_places(repo):
        source = f"{owner}/{CONFIG_PATH}"
        try:
            file = read_file(owner, CONFIG_PATH)
        except PermanentGitHubError as error:
            return unreadable(source, error)
        if file is not None:
            return parse_file(file, source)
    return RepoConfig(source=DEFAULTS_SOURCE.format(*config_places(repo), path=CONFIG_PATH)), ()


DEFAULTS_SOURCE = "the defaults: neither {0}/{path} nor {1}/{path} exists (or the App cannot see {1})"


def config_places(repo: str) -> tuple[str, str]:
    """Where the config is looked for, in order: the repository, then its organisation's `.github`."""
    return repo, f"{repo.split('/')[0]}/.github"


def unreadable(source: str, error: PermanentGitHubError) -> tuple[RepoConfig, tuple[str, ...]]:
    """The held config of a file that exists but cannot be read, with what to do about it."""
    if isinstance(error, NotAFile):
        problem = (f"{code_span(source)} is a {error.kind}, not a file: put the settings in a file of that name "
                   f"(`issue-sorter check-config FILE` checks it first)")
    elif error.status == 403:
        problem = (f"GitHub refuses {code_span(source)} to the App ({_shorten(str(error))}): on the App's settings "
                   f"page, Permissions & events, set Single file to {code_span(CONFIG_PATH)}, then accept the "
                   f"new permission on the installation (Settings, Applications, Configure)")
    else:
        problem = f"{code_span(source)} cannot be read: {_shorten(str(error))}"
    return RepoConfig(source=source, held=f"{source} cannot be read, so nothing is applied until it can: "
                                          f"{problem}"), (problem,)
