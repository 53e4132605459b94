"""A repository's own labels (issue 29): a repository replayed in time order, every scoring side by side.

huggingface/datasets by its dates by default (`--file`: any repository's issues as GitHub's API returned
them; `--areas` narrows its own labels as a config's `areas:` does); `--ccims moby/moby` or
`pytorch/pytorch`: the two repositories of ../shared with an area label (`api`) beside the kinds, body only
and undated, in a seeded shuffled order; `--nlbse-areas`: NLBSE'24's five repositories as the areas of one
(`area:react`, ...: labels every issue of an area carries), by dates or `--shuffled`.

Each own label (core.own_labels.is_candidate) is scored by one of these variants, all fitted on the
history only (the issues before the one scored), refitted every REFIT_EVERY new issues:

- `served`: what the service serves, through its own code (core.own_labels.heads.fit_rules on the history
  as an OwnLabelMemory, OwnLabelRules.score per issue: a head per label on the embedding and the TF-IDF of
  the text), with the knobs given here (OwnLabelParams; the service's by default);
- the alternatives it was chosen against, carried here: `vote`, the similarity-weighted share of the
  issue's `--neighbours` nearest earlier issues that carry it; `prior`, the issue's cosine similarity to
  the label's own name and GitHub description, embedded; `head`, a logistic regression per label on the
  embeddings alone, fitted on every earlier issue (those without the label are its negatives);
  `head+tfidf`, the same head on the embeddings and the text's words (the served head, by this module's
  code); `tfidf`, the head on the words alone; `head+prior`, the head with the label's prior similarity as
  one more feature; `head+vote` and `head+tfidf+vote`, the mean of the head's probability and the vote.

Every variant's threshold per label is the lowest whose precision reaches `--target` on the history's
own scores, each history issue scored without itself: leave-one-out for the vote, cross-fitted for a head,
where rows scored about as it are right at least `--local-precision` of the time (the service's rule,
core.own_labels.heads.threshold_at). A label is served once the history
holds `--min-examples` issues carrying it; a later issue is scored, then joins the history with all its
labels (the simulated maintainer confirms what GitHub shows). The kind is decided separately (bot.labeling.decide
decides it before the own labels, from its own inputs); `--kinds` replays it through bot.labeling.decide
with and without own labels and reports both.

The embeddings are the frozen all-MiniLM-L6-v2's (the served encoder before fine-tuning): a stand-in for
the served model's; `--encoder DIR` embeds with a registered model instead, as the service's memory does
(its `embed`, fp32 PyTorch). They are cached under var/bench-cache/ (keyed by the texts, max_length and the
model's version), so a second run costs the fits only.

    nice -n 19 .venv/bin/python -m bench.own_labels [--history 500] [--target 0.85] [--variants vote,head]

Writes docs/quality/own-labels-OWNER-NAME[-seedN]-historyH.json and .md (micro and per-label precision, recall,
labels applied per variant, and by window of new issues for each).
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import os
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np

from core.card import MODEL_CARD, ModelCard
from core.kinds import kind_of_label
from core.own_labels import OwnLabelMemory, OwnLabelParams, in_areas, is_candidate
from core.own_labels.heads import cross_fitted, fit_head, fit_rules, threshold_at
from core.own_labels.vote import vote
from core.own_labels.words import TFIDF
from tests.paths import NLBSE, SHARED
from trainer.dataset import github_objects, parse_time

REPO_ROOT = Path(__file__).resolve().parents[1]
HF_FILE = SHARED / "data" / "huggingface-datasets-issues" / "datasets-issues.zip"
CCIMS_DIR = SHARED / "data" / "ccims-issue-classification"
NLBSE_FILES = [NLBSE / "issues_train.csv", NLBSE / "issues_test.csv"]
CACHE = REPO_ROOT / "var" / "bench-cache"
REFIT_EVERY = 100  # new issues between two fits (each on the history only)
VARIANTS = ("vote", "prior", "head", "head+tfidf", "tfidf", "head+prior", "head+vote", "head+tfidf+vote", "served")
PRIOR_SCALE = 4.0  # the label's prior similarity as a `head+prior` feature, scaled: its weight costs less L2


def load_issues(path: Path, *, cleaned: bool = False, areas: list[str] | None = None
                ) -> tuple[list[dict], dict[str, str], str]:
    """(issues, no pull requests, oldest first: text, created_at and the candidate own labels each carries,
    narrowed to `areas` as a repository's config narrows them (core.own_labels.in_areas); every label's
    GitHub description as the issues' label objects give it; the repository, from the issues' URLs).
    `cleaned`: the text as the service reads it (core.issue_text.format_issue_text), else the title and the
    raw body. Any file trainer.dataset.github_objects reads: GitHub API pages, JSON Lines, a zip."""
    from core.issue_text import format_issue_text

    issues, descriptions, repositories = [], {}, Counter()
    for issue in github_objects(path):
        for label in issue.get("labels") or []:
            descriptions[label["name"]] = label.get("description") or ""
        if issue.get("pull_request"):
            continue
        if "created_at" not in issue or "number" not in issue:
            raise ValueError(f"{path}: issue objects need `number` and `created_at` (GitHub's REST API "
                             f"answer); found {sorted(issue)[:8]}")
        repositories[repository_of(issue)] += 1
        labels = [label["name"] for label in issue.get("labels") or []]
        issues.append({"number": issue["number"], "created_at": parse_time(issue["created_at"]),
                       "text": (format_issue_text(issue.get("title"), issue.get("body")) if cleaned
                                else f"{issue.get('title') or ''}\n\n{issue.get('body') or ''}"),
                       "own": own_of(labels, areas),
                       "kinds": sorted({kind for label in labels if (kind := kind_of_label(label))})})
    repository = repositories.most_common(1)[0][0] if repositories else path.stem
    return sorted(issues, key=lambda issue: (issue["created_at"], issue["number"])), descriptions, repository


def own_of(labels: list[str], areas: list[str] | None) -> list[str]:
    return sorted({label for label in labels if is_candidate(label) and in_areas(label, areas)})


def repository_of(issue: dict) -> str:
    """owner/name from an issue's `repository_url` (or `html_url`); "?" where it has neither."""
    if url := issue.get("repository_url"):
        return url.removeprefix("https://api.github.com/repos/")
    return "/".join((issue.get("html_url") or "").split("/")[3:5]) or "?"


def load_ccims_issues(repository: str, *, seed: int, areas: list[str] | None = None, cleaned: bool = False
                      ) -> tuple[list[dict], dict[str, str], str]:
    """A ccims repository's issues (../shared: body only, no date, one file per label, `api` its area label)
    as load_issues gives them, in a seeded shuffled order: an issue in several of its files carries each of
    their labels."""
    import random

    from core.issue_text import format_issue_text
    from trainer.dataset import ccims_file_parts

    carried: dict[str, set[str]] = {}
    files = sorted(path for path in CCIMS_DIR.glob("*.json") if ccims_file_parts(path)[0] == repository)
    if not files:
        raise ValueError(f"no ccims files of {repository} in {CCIMS_DIR}")
    for path in files:
        label = ccims_file_parts(path)[1]
        for row in json.loads(path.read_text(encoding="utf-8")):
            if body := (row.get("text") or "").strip():
                carried.setdefault(body, set()).add(label)
    bodies = sorted(carried)
    random.Random(seed).shuffle(bodies)
    issues = [{"number": number, "created_at": None, "text": format_issue_text("", body) if cleaned else body,
               "own": own_of(sorted(carried[body]), areas),
               "kinds": sorted({kind for label in carried[body] if (kind := kind_of_label(label))})}
              for number, body in enumerate(bodies, start=1)]
    return issues, {}, repository


def load_nlbse_monorepo(*, areas: list[str] | None = None, cleaned: bool = False, seed: int | None = None
                        ) -> tuple[list[dict], dict[str, str], str]:
    """NLBSE'24's issues of five repositories as one repository whose areas are labelled without fail: each
    issue carries `area:<its repository's name>` (`area:react`, `area:vscode`, ...) and its kind, oldest
    first, or in `seed`'s shuffled order. Not a real repository: what the replay does where every issue of
    an area carries its label. By dates the areas' shares drift (NLBSE took each repository's newest 200
    issues of a kind, so a busy repository's are all recent)."""
    from trainer.dataset import load_file

    issues = [{"created_at": example.created_at,
               "text": example.text if cleaned else f"{example.title}\n\n{example.body}",
               "own": own_of(["area:" + example.repo.split("/")[1]], areas),
               "kinds": [kind] if (kind := kind_of_label(example.label)) else []}
              for path in NLBSE_FILES for example in load_file(path)]
    issues.sort(key=lambda issue: (issue["created_at"], issue["text"]))
    if seed is not None:
        import random

        random.Random(seed).shuffle(issues)
    for number, issue in enumerate(issues, start=1):
        issue["number"] = number
    return issues, {}, "nlbse24/five-repositories-as-areas"


def embed(texts: list[str], max_length: int, model: Path | None = None) -> np.ndarray:
    """The frozen encoder's normalised embeddings, or `model`'s (a registered model's directory) as the
    service embeds an issue; from var/bench-cache/ when these texts were embedded so."""
    version = None if model is None else ModelCard.read(model).version
    key = hashlib.sha256(json.dumps([max_length, texts] + ([version] if version else [])).encode()).hexdigest()[:16]
    cached = CACHE / f"own-labels-{key}.npy"
    if cached.exists():
        return np.load(cached)
    import torch
    import transformers

    from bench.unseen import FrozenEncoder
    from trainer.config import TrainConfig

    transformers.logging.set_verbosity_error()
    torch.set_num_threads(2)
    if model is not None:
        from core.classifier import load_classifier
        from core.engines import TORCH_FP32

        vectors = np.asarray(load_classifier(model, engine=TORCH_FP32).embed(texts), dtype=np.float32)
    else:
        vectors = np.asarray(FrozenEncoder(TrainConfig(device="cpu", max_length=max_length)).vectors(texts),
                             dtype=np.float32)
    vectors /= np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-9)
    CACHE.mkdir(parents=True, exist_ok=True)
    partial = cached.with_suffix(f".{os.getpid()}.npy")  # replays side by side never read a half-written file
    np.save(partial, vectors)
    os.replace(partial, cached)
    return vectors


def loo_votes(vectors: np.ndarray, carries: np.ndarray, k: int) -> np.ndarray:
    """(rows, labels): each history row's vote by the k nearest *other* rows (no row votes for itself)."""
    similarities = vectors @ vectors.T
    np.fill_diagonal(similarities, -np.inf)
    return vote(similarities, carries, k)


class Replay:
    """The history's fits at one refit, and the scores of the issues after it, for one alternative variant."""

    def __init__(self, variant: str, params: OwnLabelParams, target: float, texts: list[str], priors: np.ndarray):
        self.variant, self.params, self.target, self.texts, self.priors = variant, params, target, texts, priors
        self.seconds = 0.0

    def fit(self, vectors: np.ndarray, carries: np.ndarray, served: np.ndarray, history: int) -> None:
        """Fit on rows [:history]; thresholds from the history's scores, each without itself."""
        started = time.perf_counter()
        self.history_vectors, self.history_carries = vectors[:history], carries[:history]
        features, self.tfidf = vectors[:history], None
        if "tfidf" in self.variant:
            features, self.tfidf = self._with_tfidf(vectors[:history], self.texts[:history])
        self.heads, self.thresholds = {}, np.full(carries.shape[1], np.inf)
        for label in np.flatnonzero(served):
            carried = carries[:history, label] > 0
            own = self._history_scores(features, carried, label)
            self.thresholds[label] = threshold_at(own, carried, self.target, self.params.local_precision)
            if self.variant not in ("vote", "prior"):
                self.heads[label] = fit_head(self._label_features(features, label), carried, self.params.head_c)
        self.seconds += time.perf_counter() - started

    def score(self, vectors: np.ndarray, i: int, labels: np.ndarray) -> np.ndarray:
        """Each label's score for issue i (rows of `labels` only; the others 0)."""
        scores = np.zeros(self.history_carries.shape[1])
        if self.variant.endswith("vote"):
            voted = vote((vectors[i] @ self.history_vectors.T)[None, :], self.history_carries,
                         self.params.neighbours)[0]
        if self.variant == "vote":
            return voted
        if self.variant == "prior":
            return self.priors @ vectors[i]
        features = vectors[i][None, :]
        if self.tfidf is not None:
            features = self._with_tfidf(features, [self.texts[i]], vectorizer=self.tfidf)[0]
        for label in labels:
            head = self.heads.get(label)
            if head is not None:
                scores[label] = head.score(self._label_features(features, label))[0]
        if self.variant.endswith("+vote"):
            scores = (scores + voted) / 2
        return scores

    def _history_scores(self, features, carried: np.ndarray, label: int) -> np.ndarray:
        if self.variant == "prior":
            return self.history_vectors @ self.priors[label]
        if self.variant == "vote":
            return self._loo_votes()[:, label]
        head = cross_fitted(self._label_features(features, label), carried, self.params)
        return (head + self._loo_votes()[:, label]) / 2 if self.variant.endswith("+vote") else head

    def _loo_votes(self) -> np.ndarray:
        if getattr(self, "_votes_for", None) is not self.history_vectors:
            self._votes, self._votes_for = loo_votes(self.history_vectors, self.history_carries,
                                                     self.params.neighbours), self.history_vectors
        return self._votes

    def _label_features(self, features, label: int):
        if self.variant != "head+prior":
            return features
        return np.hstack([features, (features @ self.priors[label])[:, None] * PRIOR_SCALE])

    def _with_tfidf(self, vectors, texts, vectorizer=None):
        from scipy.sparse import csr_matrix, hstack
        from sklearn.feature_extraction.text import TfidfVectorizer

        if vectorizer is None:
            vectorizer = TfidfVectorizer(**TFIDF)
            words = vectorizer.fit_transform(texts)
        else:
            words = vectorizer.transform(texts)
        if self.variant == "tfidf":
            return words.tocsr(), vectorizer
        return hstack([csr_matrix(vectors), words]).tocsr(), vectorizer


class Served:
    """The service's own fit and score (core.own_labels.heads.fit_rules, OwnLabelRules.score) on the replay."""

    def __init__(self, names: list[str], params: OwnLabelParams, target: float, min_examples: int, texts: list[str]):
        self.names, self.params, self.target, self.min_examples, self.seconds = names, params, target, min_examples, 0.0
        self.texts = texts

    def fit(self, vectors: np.ndarray, carries: np.ndarray, served: np.ndarray, history: int) -> None:
        started = time.perf_counter()
        labels = [frozenset(self.names[j] for j in np.flatnonzero(row)) for row in carries[:history]]
        examples = {name: int(count) for name, count in zip(self.names, carries[:history].sum(axis=0),
                                                            strict=True) if count}
        self.memory = OwnLabelMemory(vectors[:history], labels, examples, texts=self.texts[:history])
        self.rules = fit_rules(self.memory, min_examples=self.min_examples, target=self.target, params=self.params)
        self.thresholds = np.array([self.rules.thresholds.get(name, np.inf) for name in self.names])
        self.last_fit = {"rows": history, "served_labels": len(self.rules.heads),
                         "seconds": round(time.perf_counter() - started, 2)}  # one feedback-queue refit
        self.seconds += time.perf_counter() - started

    def score(self, vectors: np.ndarray, i: int, labels: np.ndarray) -> np.ndarray:
        scores = np.zeros(len(self.names))
        for scored in self.rules.score(vectors[i], [self.names[j] for j in labels], self.memory,
                                       text=self.texts[i]):
            scores[self.names.index(scored.label)] = scored.score
        return scores


def replay(issues: list[dict], vectors: np.ndarray, priors: np.ndarray, *, variant: str, history: int,
           params: OwnLabelParams, target: float, min_examples: int, window: int,
           refit_every: int = REFIT_EVERY) -> dict:
    """One variant's replay."""
    names = sorted({label for issue in issues for label in issue["own"]})
    carries = np.array([[name in issue["own"] for name in names] for issue in issues], dtype=np.float32)
    texts = [issue["text"] for issue in issues]
    runner = (Served(names, params, target, min_examples, texts) if variant == "served"
              else Replay(variant, params, target, texts, priors))
    totals, per_label, windows, current = Counter(), {name: Counter() for name in names}, [], Counter()
    from tqdm import tqdm

    for i in tqdm(range(history, len(issues)), desc=variant, unit="issue", leave=False):
        served = carries[:i].sum(axis=0) >= min_examples
        if (i - history) % refit_every == 0:
            runner.fit(vectors, carries, served, i)
        scores = runner.score(vectors, i, np.flatnonzero(served))
        applied = served & (scores >= runner.thresholds)
        truth = served & (carries[i] > 0)
        for label in np.flatnonzero(applied | truth):
            per_label[names[label]].update(applied=int(applied[label]), correct=int(applied[label] and truth[label]),
                                           truth=int(truth[label]))
        counts = Counter(applied=int(applied.sum()), correct=int((applied & truth).sum()), truth=int(truth.sum()))
        totals.update(counts)
        current.update(counts, issues=1)
        if current["issues"] == window or i == len(issues) - 1:
            windows.append({"from_issue": i + 1 - current["issues"] - history, **_rates(current),
                            "issues": current["issues"]})
            current = Counter()
    labels = {name: {**_rates(row), "examples_at_end": int(carries[:, names.index(name)].sum())}
              for name, row in per_label.items() if row["truth"] or row["applied"]}
    return {"variant": variant, "neighbours": params.neighbours, "micro": _rates(totals),
            "fit_seconds": round(runner.seconds, 1),
            "last_fit": getattr(runner, "last_fit", None),
            "windows": windows, "labels": labels}


KIND_LABELS = ["bug", "enhancement", "documentation", "question"]  # the repository's labels for the kinds


def replay_kinds(issues: list[dict], vectors: np.ndarray, *, history: int, params: OwnLabelParams, target: float,
                 min_examples: int) -> dict:
    """The kind of every new issue with one kind label, decided by bot.labeling.decide with the own labels
    on (the served rules beside it) and off: a logistic regression on the frozen embeddings of the
    history's kind-labelled issues stands in for the served model's scores (refitted every REFIT_EVERY)."""
    from sklearn.linear_model import LogisticRegression

    from bot.github_api.issues import IssueSnapshot
    from bot.labeling.decide import LabelingInputs, LabelingPolicy, decide

    names = sorted({label for issue in issues for label in issue["own"]})
    carries = np.array([[name in issue["own"] for name in names] for issue in issues], dtype=np.float32)
    served = Served(names, params, target, min_examples, [issue["text"] for issue in issues])
    decided = {"off": [], "on": []}
    for i in range(history, len(issues)):
        if (i - history) % REFIT_EVERY == 0:
            served.fit(vectors, carries, None, i)
            known = [j for j in range(i) if len(issues[j]["kinds"]) == 1]
            model = LogisticRegression(max_iter=1000, class_weight="balanced").fit(
                vectors[known], [issues[j]["kinds"][0] for j in known])
        if len(issues[i]["kinds"]) != 1:
            continue
        scores = dict(zip(model.classes_, map(float, model.predict_proba(vectors[i][None, :])[0]), strict=True))
        snapshot = IssueSnapshot(issues[i]["number"], issues[i]["text"], "", "open", (), False, None, None)
        for setting, areas in (("off", ()), ("on", None)):
            inputs = LabelingInputs("owner/repo", issues[i]["number"], snapshot,
                                    LabelingPolicy(memory=False, areas=areas, min_examples=min_examples,
                                                   own_target=target),
                                    list(model.classes_), scores=scores, vector=vectors[i],
                                    repo_labels=KIND_LABELS + names, own_memory=served.memory,
                                    own_rules=served.rules)
            plan = decide(inputs)
            decided[setting].append((issues[i]["kinds"][0], kind_of_label(plan.label) if plan.label else None,
                                     plan.own_applied))
    return {setting: _kind_quality(rows) for setting, rows in decided.items()} | {
        "same_kind_decisions": sum(a[1] == b[1] for a, b in zip(decided["off"], decided["on"], strict=True)),
        "issues": len(decided["on"])}


def _kind_quality(rows: list[tuple]) -> dict:
    from sklearn.metrics import f1_score

    truth, predicted = [row[0] for row in rows], [row[1] or "abstained" for row in rows]
    applied = [row for row in rows if row[1] is not None]
    return {"accuracy": round(sum(t == p for t, p in zip(truth, predicted, strict=True)) / len(rows), 3),
            "macro_f1": round(float(f1_score(truth, predicted, labels=sorted(set(truth)), average="macro",
                                             zero_division=0)), 3),
            "applied": len(applied), "own_labels_applied": sum(len(row[2]) for row in rows)}


def _rates(row: Counter) -> dict:
    return {"precision": round(row["correct"] / row["applied"], 3) if row["applied"] else None,
            "recall": round(row["correct"] / row["truth"], 3) if row["truth"] else None,
            "applied": row["applied"], "correct": row["correct"], "carried": row["truth"]}


def cpu_name() -> str:
    """The CPU's model name, and whether it has AVX-512 (the fits' speed depends on it)."""
    try:
        info = Path("/proc/cpuinfo").read_text()
    except OSError:
        return "unknown CPU"
    name = next((line.split(":", 1)[1].strip() for line in info.splitlines() if line.startswith("model name")), "?")
    return f"{name}, {os.cpu_count()} cores, {'AVX-512' if ' avx512f' in info else 'no AVX-512'}"


def label_texts(names: list[str], descriptions: dict[str, str]) -> list[str]:
    """What the prior embeds for each label: its name, and its GitHub description where it has one."""
    return [label_text(name, descriptions.get(name)) for name in names]


def label_text(name: str, description: str | None) -> str:
    words = name.replace("-", " ").replace("_", " ").replace(":", ": ").replace("/", " / ")
    return f"{words}: {description}" if description else words


def report_markdown(record: dict) -> str:
    lines = [f"# Own labels: {record['repo']}, {record.get('order', 'by dates')}", "",
             f"Measured {record['date']}; history {record['history']} issues, {record['new_issues']} new ones; "
             f"target precision {record['target']}, a label served from {record['min_examples']} examples; "
             f"the rule's knobs {record['params']}; "
             f"embeddings: {record.get('encoder', 'frozen all-MiniLM-L6-v2')}.", "",
             f"CPU: {record.get('cpu')}. Command: `{record['command']}`", "",
             "| variant | k | micro precision | micro recall | labels applied | carried (served labels) | fits (s) |",
             "|---|---|---|---|---|---|---|"]
    for run in record["runs"]:
        micro = run["micro"]
        lines.append(f"| {run['variant']} | {run['neighbours']} | {micro['precision']} | {micro['recall']} | "
                     f"{micro['applied']} | {micro['carried']} | {run['fit_seconds']} |")
    names = sorted({name for run in record["runs"] for name in run["labels"]},
                   key=lambda name: -max(run["labels"].get(name, {}).get("carried", 0) for run in record["runs"]))
    lines += ["", "Per label, precision / recall (applied):", "",
              "| label | carried | " + " | ".join(run["variant"] for run in record["runs"]) + " |",
              "|---|---|" + "---|" * len(record["runs"])]
    for name in names:
        cells = []
        for run in record["runs"]:
            row = run["labels"].get(name)
            cells.append(f"{row['precision']} / {row['recall']} ({row['applied']})" if row else "–")
        carried = max(run["labels"].get(name, {}).get("carried", 0) for run in record["runs"])
        lines.append(f"| {name} | {carried} | " + " | ".join(cells) + " |")
    lines += ["", "By window of new issues, precision / recall:", "",
              "| new issues from | " + " | ".join(run["variant"] for run in record["runs"]) + " |",
              "|---|" + "---|" * len(record["runs"])]
    for position, row in enumerate(record["runs"][0]["windows"]):
        cells = [f"{run['windows'][position]['precision']} / {run['windows'][position]['recall']}"
                 for run in record["runs"]]
        lines.append(f"| {row['from_issue']} | " + " | ".join(cells) + " |")
    for run in record["runs"]:
        if run.get("last_fit"):
            fit = run["last_fit"]
            lines += ["", f"The service's last refit ({run['variant']}): {fit['rows']} memory rows, "
                      f"{fit['served_labels']} served labels, {fit['seconds']} s (what one feedback-queue "
                      "refresh costs when the memory moved)."]
    if record.get("kinds"):
        kinds = record["kinds"]
        lines += ["", f"The kind of the {kinds['issues']} new issues with one kind label, decided by "
                  "bot.labeling.decide with own labels off and on (the same kind decided on "
                  f"{kinds['same_kind_decisions']}):", "",
                  "| own labels | kind accuracy | kind macro-F1 | kinds applied | own labels applied |",
                  "|---|---|---|---|---|"]
        for name in ("off", "on"):
            row = kinds[name]
            lines.append(f"| {name} | {row['accuracy']} | {row['macro_f1']} | {row['applied']} | "
                         f"{row['own_labels_applied']} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--file", type=Path, default=HF_FILE,
                        help="a repository's issues as GitHub's API gives them (JSON pages, JSON Lines, zip) "
                             "replayed by their dates (default: huggingface/datasets from ../shared)")
    parser.add_argument("--ccims", metavar="OWNER/NAME",
                        help="instead, a ccims repository of ../shared with an area label (moby/moby, "
                             "pytorch/pytorch: `api`), body only and undated: replayed in --seed's order")
    parser.add_argument("--nlbse-areas", action="store_true",
                        help="instead, NLBSE'24's five repositories as the areas of one (`area:react`, ...), "
                             "by their dates: areas that every issue of theirs carries")
    parser.add_argument("--seed", type=int, default=0, help="the order of a --ccims replay")
    parser.add_argument("--shuffled", action="store_true", help="--nlbse-areas in --seed's order, not by dates")
    parser.add_argument("--areas", help="the config's `areas:`, comma-separated names or prefixes "
                                        "(`module:,area-`): only those labels are own labels")
    parser.add_argument("--history", type=int, default=500)
    parser.add_argument("--target", type=float, default=0.85)
    parser.add_argument("--min-examples", type=int, default=20)
    served = OwnLabelParams()
    parser.add_argument("--neighbours", type=int, default=served.neighbours,
                        help="confirmed issues whose vote scores a label no head serves (and the `vote` variants')")
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--window", type=int, default=500)
    parser.add_argument("--refit-every", type=int, default=REFIT_EVERY,
                        help="new issues between two fits (fewer fits: a faster replay of a large repository)")
    parser.add_argument("--max-length", type=int, default=128)
    parser.add_argument("--head-c", type=float, default=served.head_c,
                        help="the heads' inverse L2 strength (OwnLabelParams.head_c), to show what it moves")
    parser.add_argument("--stopped-expected", type=float, default=served.stopped_expected,
                        help="a label none of the newest rows carries where its share expected this many "
                             "there is no longer applied (OwnLabelParams.stopped_expected; 0: off)")
    parser.add_argument("--local-precision", type=float, default=served.local_precision,
                        help="a threshold's own neighbourhood (isotonic in the score) must be right this often "
                             "too (OwnLabelParams.local_precision; 0: off)")
    parser.add_argument("--cleaned-text", action="store_true",
                        help="read each issue as the service does (core.issue_text), not the raw body")
    parser.add_argument("--kinds", action="store_true", help="also replay the kind with and without own labels")
    parser.add_argument("--encoder", type=Path, help="embed with this registered model's directory (as the "
                                                       "service does) instead of the frozen all-MiniLM-L6-v2")
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "docs" / "quality")
    args = parser.parse_args(argv)
    variants = args.variants.split(",")
    params = OwnLabelParams(neighbours=args.neighbours, head_c=args.head_c,
                            local_precision=args.local_precision, stopped_expected=args.stopped_expected or None)
    if args.refit_every < 1:
        parser.error("--refit-every must be at least 1")
    if unknown := set(variants) - set(VARIANTS):
        parser.error(f"unknown variants {sorted(unknown)}: choose among {', '.join(VARIANTS)}")
    areas = [area.strip() for area in args.areas.split(",") if area.strip()] if args.areas else None
    try:
        if args.ccims:
            issues, descriptions, repository = load_ccims_issues(args.ccims, seed=args.seed, areas=areas,
                                                                   cleaned=args.cleaned_text)
        elif args.nlbse_areas:
            issues, descriptions, repository = load_nlbse_monorepo(areas=areas, cleaned=args.cleaned_text,
                                                                   seed=args.seed if args.shuffled else None)
        elif not args.file.exists():
            parser.error(f"no {args.file}: give a repository's issues as GitHub's API returned them")
        else:
            issues, descriptions, repository = load_issues(args.file, cleaned=args.cleaned_text, areas=areas)
    except ValueError as error:
        parser.error(str(error))
    if len(issues) <= args.history:
        parser.error(f"{repository} has {len(issues)} issues: --history {args.history} leaves none to replay")
    if not any(issue["own"] for issue in issues):
        parser.error(f"{repository}: no issue carries an own label" + (f" in areas {areas}" if areas else ""))
    print(f"{len(issues)} issues, {sum(bool(i['own']) for i in issues)} with an own label; embedding", flush=True)
    names = sorted({label for issue in issues for label in issue["own"]})
    if args.encoder and not (args.encoder / MODEL_CARD).is_file():
        parser.error(f"--encoder {args.encoder}: no registered model there (no {MODEL_CARD})")
    vectors = embed([issue["text"] for issue in issues], args.max_length, args.encoder)
    priors = embed(label_texts(names, descriptions), args.max_length, args.encoder)
    runs = []
    for variant in variants:
        runs.append(replay(issues, vectors, priors, variant=variant, history=args.history, params=params,
                           target=args.target, min_examples=args.min_examples, window=args.window,
                           refit_every=args.refit_every))
        print(f"{variant}: {runs[-1]['micro']} ({runs[-1]['fit_seconds']} s of fits)", flush=True)
    kinds = (replay_kinds(issues, vectors, history=args.history, params=params, target=args.target,
                          min_examples=args.min_examples) if args.kinds else None)
    shuffled = args.ccims or (args.nlbse_areas and args.shuffled)
    record = {"repo": repository, "order": f"shuffled, seed {args.seed}" if shuffled else "by dates",
              "areas": areas,
              "date": dt.date.today().isoformat(), "cpu": cpu_name(),
              "history": args.history, "refit_every": args.refit_every,
              "new_issues": len(issues) - args.history, "target": args.target,
              "min_examples": args.min_examples, "params": params.key(),
              "encoder": ModelCard.read(args.encoder).version if args.encoder else "frozen all-MiniLM-L6-v2",
              "runs": runs, "kinds": kinds,
              "command": "python -m bench.own_labels " + " ".join(argv if argv is not None else sys.argv[1:])}
    args.out.mkdir(parents=True, exist_ok=True)
    stem = (f"own-labels-{repository.replace('/', '-')}" + (f"-seed{args.seed}" if shuffled else "")
            + f"-history{args.history}")
    (args.out / f"{stem}.json").write_text(json.dumps(record, indent=1) + "\n")
    (args.out / f"{stem}.md").write_text(report_markdown(record))
    print(report_markdown(record))
    return 0


if __name__ == "__main__":
    sys.exit(main())
