"""A repository's own labels: a repository replayed in time order through the service's own fit and score.

    OMP_NUM_THREADS=1 .venv/bin/python -m bench.own_labels [--history 500] [--encoder var/models/<version>]

Writes docs/quality/own-labels-OWNER-NAME[-seedN]-historyH.json and .md (micro and per-label precision and
recall, by window of new issues). Results, the other replays (`--ccims`, `--nlbse-areas`) and the
alternatives the rule was chosen against: BENCHMARKS.md.
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

from bench.quality import write_report
from bench.serving import cpu_line
from core.card import MODEL_CARD, ModelCard
from core.own_labels import OwnLabelMemory, OwnLabelParams, in_areas, is_candidate
from core.own_labels.heads import fit_rules
from tests.paths import NLBSE, REPO_ROOT, SHARED
from trainer.dataset import github_objects, parse_time

HF_FILE = SHARED / "data" / "huggingface-datasets-issues" / "datasets-issues.zip"
CCIMS_DIR = SHARED / "data" / "ccims-issue-classification"
NLBSE_FILES = [NLBSE / "issues_train.csv", NLBSE / "issues_test.csv"]
CACHE = REPO_ROOT / "var" / "bench-cache"
REFIT_EVERY = 100  # new issues between two fits (each on the history only)


def load_issues(path: Path, *, cleaned: bool = False, areas: list[str] | None = None
                ) -> tuple[list[dict], str]:
    """(issues, no pull requests, oldest first: text, created_at and the candidate own labels each carries,
    narrowed to `areas` as a repository's config narrows them (core.own_labels.in_areas); the repository).
    `cleaned`: the text as the service reads it (core.issue_text.format_issue_text), else the title and the
    raw body. Any file trainer.dataset.github_objects reads: GitHub API pages, JSON Lines, a zip."""
    from core.issue_text import format_issue_text

    issues, repositories = [], Counter()
    for issue in github_objects(path):
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
                       "own": own_of(labels, areas)})
    repository = repositories.most_common(1)[0][0] if repositories else path.stem
    return sorted(issues, key=lambda issue: (issue["created_at"], issue["number"])), repository


def own_of(labels: list[str], areas: list[str] | None) -> list[str]:
    return sorted({label for label in labels if is_candidate(label) and in_areas(label, areas)})


def repository_of(issue: dict) -> str:
    """owner/name from an issue's `repository_url` (or `html_url`); "?" where it has neither."""
    if url := issue.get("repository_url"):
        return url.removeprefix("https://api.github.com/repos/")
    return "/".join((issue.get("html_url") or "").split("/")[3:5]) or "?"


def load_ccims_issues(repository: str, *, seed: int, areas: list[str] | None = None, cleaned: bool = False
                      ) -> tuple[list[dict], str]:
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
               "own": own_of(sorted(carried[body]), areas)}
              for number, body in enumerate(bodies, start=1)]
    return issues, repository


def load_nlbse_monorepo(*, areas: list[str] | None = None, cleaned: bool = False, seed: int | None = None
                        ) -> tuple[list[dict], str]:
    """NLBSE'24's issues of five repositories as one repository whose areas are labelled without fail: each
    issue carries `area:<its repository's name>` (`area:react`, `area:vscode`, ...), oldest
    first, or in `seed`'s shuffled order. Not a real repository: what the replay does where every issue of
    an area carries its label. By dates the areas' shares drift (NLBSE took each repository's newest 200
    issues of a kind, so a busy repository's are all recent)."""
    from trainer.dataset import load_file

    issues = [{"created_at": example.created_at,
               "text": example.text if cleaned else f"{example.title}\n\n{example.body}",
               "own": own_of(["area:" + example.repo.split("/")[1]], areas)}
              for path in NLBSE_FILES for example in load_file(path)]
    issues.sort(key=lambda issue: (issue["created_at"], issue["text"]))
    if seed is not None:
        import random

        random.Random(seed).shuffle(issues)
    for number, issue in enumerate(issues, start=1):
        issue["number"] = number
    return issues, "nlbse24/five-repositories-as-areas"


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

    transformers.logging.set_verbosity_error()
    torch.set_num_threads(2)
    if model is not None:
        from core.classifier import load_classifier
        from core.engines import TORCH_FP32

        vectors = np.asarray(load_classifier(model, engine=TORCH_FP32).embed(texts), dtype=np.float32)
    else:
        vectors = frozen_vectors(texts, max_length)
    vectors /= np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-9)
    CACHE.mkdir(parents=True, exist_ok=True)
    partial = cached.with_suffix(f".{os.getpid()}.npy")  # replays side by side never read a half-written file
    np.save(partial, vectors)
    os.replace(partial, cached)
    return vectors


def frozen_vectors(texts: list[str], max_length: int) -> np.ndarray:
    """The frozen base encoder's mean-pooled embeddings (as sentence-transformers computes them), each
    distinct text once, in batches of 32 sorted by length (nearly pad-free)."""
    import torch
    from tqdm import tqdm
    from transformers import AutoModel, AutoTokenizer

    from trainer.config import TrainConfig

    source = TrainConfig(device="cpu", max_length=max_length).resolved_base_model()
    tokenizer, encoder = AutoTokenizer.from_pretrained(source), AutoModel.from_pretrained(source).eval()
    distinct, pooled = sorted(set(texts), key=len), {}
    with torch.inference_mode():
        for start in tqdm(range(0, len(distinct), 32), desc="embedding", unit="batch of 32"):
            batch = distinct[start:start + 32]
            encoded = tokenizer(batch, truncation=True, max_length=max_length, padding=True, return_tensors="pt")
            hidden = encoder(**encoded).last_hidden_state
            mask = encoded["attention_mask"].unsqueeze(-1).to(hidden.dtype)
            pooled.update(zip(batch, ((hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)).numpy(), strict=True))
    return np.asarray([pooled[text] for text in texts], dtype=np.float32)


class Served:
    """The service's own fit and score (core.own_labels.heads.fit_rules, OwnLabelRules.score) on the replay."""

    def __init__(self, names: list[str], params: OwnLabelParams, target: float, min_examples: int, texts: list[str]):
        self.names, self.params, self.target, self.min_examples, self.seconds = names, params, target, min_examples, 0.0
        self.texts = texts

    def fit(self, vectors: np.ndarray, carries: np.ndarray, history: int) -> None:
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


def replay(issues: list[dict], vectors: np.ndarray, *, history: int, params: OwnLabelParams, target: float,
           min_examples: int, window: int, refit_every: int = REFIT_EVERY) -> dict:
    """Every issue after the history scored by the served rules fitted on the issues before it."""
    from tqdm import tqdm

    names = sorted({label for issue in issues for label in issue["own"]})
    carries = np.array([[name in issue["own"] for name in names] for issue in issues], dtype=np.float32)
    runner = Served(names, params, target, min_examples, [issue["text"] for issue in issues])
    totals, per_label, windows, current = Counter(), {name: Counter() for name in names}, [], Counter()
    for i in tqdm(range(history, len(issues)), unit="issue", leave=False):
        served = carries[:i].sum(axis=0) >= min_examples
        if (i - history) % refit_every == 0:
            runner.fit(vectors, carries, i)
        applied = served & (runner.score(vectors, i, np.flatnonzero(served)) >= runner.thresholds)
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
    return {"neighbours": params.neighbours, "micro": _rates(totals), "fit_seconds": round(runner.seconds, 1),
            "last_fit": runner.last_fit, "windows": windows, "labels": labels}


def _rates(row: Counter) -> dict:
    return {"precision": round(row["correct"] / row["applied"], 3) if row["applied"] else None,
            "recall": round(row["correct"] / row["truth"], 3) if row["truth"] else None,
            "applied": row["applied"], "correct": row["correct"], "carried": row["truth"]}


def report_markdown(record: dict) -> str:
    run, micro = record["run"], record["run"]["micro"]
    lines = [f"# Own labels: {record['repo']}, {record['order']}", "",
             (f"Measured {record['date']}; history {record['history']} issues, {record['new_issues']} new ones; "
              f"target precision {record['target']}, a label served from {record['min_examples']} examples; "
              f"the rule's knobs {record['params']}; embeddings: {record['encoder']}."), "",
             f"{record['cpu']}. Command: `{record['command']}`", "",
             (f"Micro precision {micro['precision']}, recall {micro['recall']}: {micro['applied']} labels "
              f"applied, {micro['carried']} carried (served labels); {run['fit_seconds']} s of fits."), "",
             "| label | carried | precision | recall | applied |", "|---|---|---|---|---|"]
    for name, row in sorted(run["labels"].items(), key=lambda item: -item[1]["carried"]):
        lines.append(f"| {name} | {row['carried']} | {row['precision']} | {row['recall']} | "
                     f"{row['applied']} |")
    lines += ["", "| new issues from | precision | recall |", "|---|---|---|"]
    lines += [f"| {row['from_issue']} | {row['precision']} | {row['recall']} |" for row in run["windows"]]
    fit = run["last_fit"]
    lines += ["", (f"The service's last refit: {fit['rows']} memory rows, {fit['served_labels']} served "
              f"labels, {fit['seconds']} s (what one feedback-queue refresh costs when the memory moved).")]
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
    parser.add_argument("--window", type=int, default=500)
    parser.add_argument("--refit-every", type=int, default=REFIT_EVERY,
                        help="new issues between two fits (fewer fits: a faster replay of a large repository)")
    parser.add_argument("--max-length", type=int, default=128)
    parser.add_argument("--cleaned-text", action="store_true",
                        help="read each issue as the service does (core.issue_text), not the raw body")
    parser.add_argument("--encoder", type=Path, help="embed with this registered model's directory (as the "
                                                       "service does) instead of the frozen all-MiniLM-L6-v2")
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "docs" / "quality")
    args = parser.parse_args(argv)
    params = OwnLabelParams()  # the service's rule, as it serves
    if args.refit_every < 1:
        parser.error("--refit-every must be at least 1")
    areas = [area.strip() for area in args.areas.split(",") if area.strip()] if args.areas else None
    try:
        if args.ccims:
            issues, repository = load_ccims_issues(args.ccims, seed=args.seed, areas=areas,
                                                   cleaned=args.cleaned_text)
        elif args.nlbse_areas:
            issues, repository = load_nlbse_monorepo(areas=areas, cleaned=args.cleaned_text,
                                                     seed=args.seed if args.shuffled else None)
        elif not args.file.exists():
            parser.error(f"no {args.file}: give a repository's issues as GitHub's API returned them")
        else:
            issues, repository = load_issues(args.file, cleaned=args.cleaned_text, areas=areas)
    except ValueError as error:
        parser.error(str(error))
    if len(issues) <= args.history:
        parser.error(f"{repository} has {len(issues)} issues: --history {args.history} leaves none to replay")
    if not any(issue["own"] for issue in issues):
        parser.error(f"{repository}: no issue carries an own label" + (f" in areas {areas}" if areas else ""))
    print(f"{len(issues)} issues, {sum(bool(i['own']) for i in issues)} with an own label; embedding", flush=True)
    if args.encoder and not (args.encoder / MODEL_CARD).is_file():
        parser.error(f"--encoder {args.encoder}: no registered model there (no {MODEL_CARD})")
    vectors = embed([issue["text"] for issue in issues], args.max_length, args.encoder)
    run = replay(issues, vectors, history=args.history, params=params, target=args.target,
                 min_examples=args.min_examples, window=args.window, refit_every=args.refit_every)
    shuffled = args.ccims or (args.nlbse_areas and args.shuffled)
    record = {"repo": repository, "order": f"shuffled, seed {args.seed}" if shuffled else "by dates",
              "areas": areas, "date": dt.date.today().isoformat(), "cpu": cpu_line(),
              "history": args.history, "refit_every": args.refit_every,
              "new_issues": len(issues) - args.history, "target": args.target,
              "min_examples": args.min_examples, "params": params.key(),
              "encoder": ModelCard.read(args.encoder).version if args.encoder else "frozen all-MiniLM-L6-v2",
              "run": run,
              "command": "python -m bench.own_labels " + " ".join(argv if argv is not None else sys.argv[1:])}
    stem = (f"own-labels-{repository.replace('/', '-')}" + (f"-seed{args.seed}" if shuffled else "")
            + f"-history{args.history}")
    return write_report(args.out, stem, record, report_markdown(record))


if __name__ == "__main__":
    sys.exit(main())
