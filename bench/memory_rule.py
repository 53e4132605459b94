"""The memory's rule, chosen on many repositories: every candidate rule replayed as an install on each
repository the model never saw, chosen by leave-one-repository-out (issue 24, item 3).

From bench/unseen.py's out-of-fold scores (the served blend, TF-IDF share `--share`) and embeddings (its
fold's fine-tuned encoder), each repository is replayed as an install with history: its issues in date
order (a seeded shuffle where its source has no dates); issue i is scored with the memory of issues
0 … i-1, each confirmed with its true kind (the simulated maintainer), so "N issues at install" is the
replay's issues from the N-th on. For each N of SIZES (where the repository has N + `--min-rest`), the
issues after the N are scored by macro-F1 over the kinds present, accuracy and each kind's F1, for the
cold model (no memory) and every candidate rule (`Rule`, vectorised with numpy: no model is run).

The choice, leave-one-repository-out: for each repository, the rule best on all the *other* ones: among
the rules that never lower macro-F1 more than `--tolerance` below cold at an N >= 10 on any of them, the
one with the highest mean over N of the mean over repositories of (Δ macro-F1 + Δ accuracy) / 2; the
held-out repository is reported under that rule. The rule chosen on all repositories is what
core.memory serves; `check_against_core` replays it through `core.memory.Memory` as well.

    nice .venv/bin/python -m bench.memory_rule [--workdir var/bench-unseen] [--share 0.5]

Writes <out>/memory-rule.json and .md (out: docs/quality).
"""

from __future__ import annotations

import argparse
import datetime as dt
import itertools
import json
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from bench.quality import run_record, write_report
from bench.unseen import add_out_of_fold_arguments, is_repository
from core import memory
from core.kinds import KINDS

REPO_ROOT = Path(__file__).resolve().parents[1]

SIZES = (0, 10, 25, 100, 400, 1000)  # confirmed issues in the memory at install
GUARDED_FROM = 10  # the condition: from this memory size on, macro-F1 never more than the tolerance below cold
MOST_NEIGHBOURS = 20  # neighbours kept per issue; every candidate k is at most this
CHECKPOINTS = ((30, 1), (200, 5), (1000, 25), (10 ** 9, 100))  # (up to, every): when the self-check is redone

# The candidates: every combination of these (`Rule`); the served constants are one of them.
GRID = {"neighbours": (3, 5, 10, 20), "balanced": (False, True), "weight": (0.3, 0.5, 0.7, 1.0),
        "ramp": (0, 10, 25, 50, 100), "prior": (-0.5, 0.0, 0.5, 1.0),
        "check": (("none", 0.0), ("majority", 2.0), ("majority", 4.0), ("majority", 8.0),
                  ("model", 2.0), ("model", 4.0), ("model", 8.0))}


@dataclass(frozen=True)
class Rule:
    """One candidate: core.memory's rule with these constants.

    Scores: normalise(model × prior^prior)^(1-w') × vote^w', w' = weight · n/(n + ramp) · trust, where the
    vote is the `neighbours` most similar confirmed issues' similarities (each divided by its kind's share
    of the memory when `balanced`), and trust = clip(check_gain × (a − a_ref), 0, 1), a being how often that
    vote names the kind of the memory's latest issues leave-one-out and a_ref how often the memory's most
    frequent kind does ("majority") or the model alone does ("model": from the model's own scores, which
    the memory stores with each row); "none": trust 1.
    """

    neighbours: int
    balanced: bool
    weight: float
    ramp: float
    prior: float
    check: str
    check_gain: float

    @property
    def name(self) -> str:
        check = "no check" if self.check == "none" else f"check vs {self.check} ×{self.check_gain:g}"
        return (f"k {self.neighbours}, {'balanced' if self.balanced else 'similarity'} vote, w {self.weight:g}, "
                f"ramp {self.ramp:g}, prior {self.prior:g}, {check}")


SERVED_BEFORE = Rule(neighbours=5, balanced=False, weight=0.7, ramp=0, prior=0.0, check="none", check_gain=0.0)


def candidates() -> list[Rule]:
    return [Rule(k, balanced, weight, ramp, prior, check, gain)
            for k, balanced, weight, ramp, prior, (check, gain) in itertools.product(*GRID.values())]


# ---- the replay ----------------------------------------------------------------------------------------

@dataclass
class Stream:
    """One repository's scored issues in replay order."""

    repo: str
    ordered_by: str  # "date" or "seeded shuffle"
    labels: np.ndarray  # (n,) index into KINDS
    scores: np.ndarray  # (n, C) the served blend's probabilities, KINDS order
    vectors: np.ndarray  # (n, d) L2-normalised


def streams(pool: list[dict], scores: list[dict], vectors: np.ndarray, seed: int) -> list[Stream]:
    """Each repository's issues, oldest first where every one has a date, else in a seeded shuffle. Groups
    that are no repository (Ticket Tagger's issues come from many) are left out: no install sees them."""
    rng = np.random.default_rng(seed)
    by_repo: dict[str, list[int]] = {}
    for i, row in enumerate(pool):
        if is_repository(row["repo"]):
            by_repo.setdefault(row["repo"], []).append(i)
    result = []
    for repo in sorted(by_repo, key=str):
        rows = by_repo[repo]
        dated = all(pool[i].get("created_at") for i in rows)
        order = sorted(rows, key=lambda i: (pool[i]["created_at"], i)) if dated else list(rng.permutation(rows))
        block = vectors[order]
        norms = np.linalg.norm(block, axis=1, keepdims=True)
        result.append(Stream(repo, "date" if dated else "seeded shuffle",
                             np.array([KINDS.index(pool[i]["label"]) for i in order]),
                             np.array([[scores[i].get(kind, 0.0) for kind in KINDS] for i in order]),
                             block / np.where(norms == 0, 1, norms)))
    return result


class Replay:
    """What every rule needs of one stream, computed once: each issue's nearest earlier issues, the
    memory's kind counts before each issue, and the self-checks at checkpoints."""

    def __init__(self, stream: Stream):
        self.stream = stream
        n, classes = len(stream.labels), len(KINDS)
        self.similarity = stream.vectors @ stream.vectors.T
        earlier = np.where(np.tri(n, k=-1, dtype=bool), self.similarity, -np.inf)  # row i: columns j < i
        width = min(MOST_NEIGHBOURS, max(n - 1, 1))
        top = np.argpartition(-earlier, width - 1, axis=1)[:, :width]
        sims = np.take_along_axis(earlier, top, axis=1)
        by_similarity = np.argsort(-sims, axis=1, kind="stable")
        self.neighbours = np.take_along_axis(top, by_similarity, axis=1)
        self.neighbour_sims = np.take_along_axis(sims, by_similarity, axis=1)
        self.valid = np.isfinite(self.neighbour_sims)
        onehot = np.eye(classes)[stream.labels]
        self.counts = np.vstack([np.zeros((1, classes)), np.cumsum(onehot, axis=0)[:-1]])  # before issue i
        self.sizes = np.arange(n)
        self.model_log = np.log(np.maximum(stream.scores, 1e-9))
        self.prior_log = np.log((self.counts + memory.PRIOR_SMOOTHING)
                                / (self.sizes[:, None] + memory.PRIOR_SMOOTHING * classes))
        self.checkpoints = checkpoints(n)
        self._votes: dict = {}
        self._checks: dict = {}

    def vote_log(self, k: int, balanced: bool) -> np.ndarray:
        """log of each issue's kNN vote (core.memory.knn_vote), (n, C)."""
        key = (k, balanced)
        if key not in self._votes:
            labels = self.stream.labels[self.neighbours[:, :k]]
            sims = np.where(self.valid[:, :k], np.maximum(self.neighbour_sims[:, :k], 0.0), 0.0)
            if balanced:
                sims = sims * _balancing(self.counts, self.sizes, labels)
            votes = memory.VOTE_SMOOTHING + np.einsum("nk,nkc->nc", sims, np.eye(len(KINDS))[labels])
            self._votes[key] = np.log(votes / votes.sum(axis=1, keepdims=True))
        return self._votes[key]

    def trust(self, rule: Rule) -> np.ndarray:
        """Each issue's trust in the vote (1 without a check), from the latest checkpoint before it."""
        if rule.check == "none":
            return np.ones(len(self.sizes))
        key = (rule.neighbours, rule.balanced)
        if key not in self._checks:
            self._checks[key] = self._self_checks(*key)
        agreement, majority, model = self._checks[key]
        gain = agreement - (majority if rule.check == "majority" else model)
        at_checkpoint = np.clip(rule.check_gain * gain, 0.0, 1.0)
        latest = np.searchsorted(self.checkpoints, self.sizes, side="right") - 1
        return at_checkpoint[latest]

    def _self_checks(self, k: int, balanced: bool) -> tuple[np.ndarray, ...]:
        """At each checkpoint size m: (how often the vote names the kind of the memory's latest
        SELF_CHECK_ISSUES leave-one-out, how often the memory's most frequent kind is theirs, how often
        the model alone is right on them), as `core.memory.Memory.self_check` computes the first two."""
        labels, predicted = self.stream.labels, self.stream.scores.argmax(axis=1)
        results = np.zeros((3, len(self.checkpoints)))
        for c, m in enumerate(self.checkpoints):
            if m < 2:
                continue
            latest = np.arange(max(0, m - memory.SELF_CHECK_ISSUES), m)
            agreement, majority = memory.self_check_agreement(
                self.stream.vectors[:m], [KINDS[i] for i in labels[:m]], k=k, balanced=balanced,
                rows=latest, similarity=self.similarity[latest][:, :m])
            results[:, c] = agreement, majority, np.mean(predicted[latest] == labels[latest])
        return results[0], results[1], results[2]

    def predict(self, rule: Rule) -> np.ndarray:
        """Each issue's kind (index into KINDS) under `rule`; the first issue gets the model's."""
        weight = rule.weight * self.sizes / (self.sizes + rule.ramp) if rule.ramp else \
            np.full(len(self.sizes), rule.weight)
        weight = np.where(self.sizes > 0, weight * self.trust(rule), 0.0)[:, None]
        corrected = self.model_log + rule.prior * self.prior_log
        corrected = corrected - np.logaddexp.reduce(corrected, axis=1, keepdims=True)
        return ((1 - weight) * corrected + weight * self.vote_log(rule.neighbours, rule.balanced)).argmax(axis=1)


def _balancing(counts: np.ndarray, sizes: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """1 / (C × the neighbour's kind's smoothed share of the memory): 1 in a balanced memory."""
    classes = counts.shape[1]
    share = (counts + memory.PRIOR_SMOOTHING) / (sizes[:, None] + memory.PRIOR_SMOOTHING * classes)
    return 1.0 / (classes * np.take_along_axis(share, labels, axis=1))


def checkpoints(n: int) -> np.ndarray:
    """Memory sizes at which the self-check is redone (the serving worker redoes it every job)."""
    points, m = [], 0
    for limit, every in CHECKPOINTS:
        while m < min(limit, n):
            points.append(m)
            m += every
    return np.array(points)


# ---- scoring -------------------------------------------------------------------------------------------

def figures(truth: np.ndarray, predicted: np.ndarray) -> dict:
    """Macro-F1 over the kinds present, accuracy, and each present kind's F1."""
    per_kind = {}
    for c, kind in enumerate(KINDS):
        if not (truth == c).any():
            continue
        tp = np.sum((predicted == c) & (truth == c))
        per_kind[kind] = 2 * tp / (np.sum(predicted == c) + np.sum(truth == c))
    return {"macro_f1": float(np.mean(list(per_kind.values()))), "accuracy": float(np.mean(truth == predicted)),
            "per_kind": {kind: float(value) for kind, value in per_kind.items()}}


def sizes_of(n: int, min_rest: int) -> list[int]:
    return [size for size in SIZES if n >= size + min_rest]


def windows_of(n: int) -> list[tuple[int, int]]:
    """Issues scored with a memory of SIZES[j] … SIZES[j+1]-1 issues (the last window: to the end)."""
    edges = [size for size in SIZES if size < n] + [n]
    return list(itertools.pairwise(edges))


def deltas(replays: list[Replay], rules: list[Rule], min_rest: int) -> np.ndarray:
    """(rules, repositories, SIZES, 2): Δ macro-F1 and Δ accuracy against cold after each N (NaN where a
    repository has too few issues)."""
    result = np.full((len(rules), len(replays), len(SIZES), 2), np.nan)
    for r, replay in enumerate(replays):
        truth = replay.stream.labels
        cold = replay.stream.scores.argmax(axis=1)
        available = sizes_of(len(truth), min_rest)
        base = [figures(truth[size:], cold[size:]) for size in available]
        for q, rule in enumerate(rules):
            predicted = replay.predict(rule)
            for s, size in enumerate(available):
                warm = figures(truth[size:], predicted[size:])
                result[q, r, s] = (warm["macro_f1"] - base[s]["macro_f1"], warm["accuracy"] - base[s]["accuracy"])
    return result


def criterion(delta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per rule over the given repositories: (worst Δ macro-F1 at N >= GUARDED_FROM, the mean over N of
    the mean over repositories of (Δ macro-F1 + Δ accuracy) / 2)."""
    guarded = [s for s, size in enumerate(SIZES) if size >= GUARDED_FROM]
    worst = np.nanmin(delta[:, :, guarded, 0].reshape(len(delta), -1), axis=1)
    with np.errstate(all="ignore"):
        per_size = np.nanmean(delta.mean(axis=3), axis=1)  # mean over repositories having that N
    return worst, np.nanmean(per_size, axis=1)


def choose(delta: np.ndarray, rules: list[Rule], tolerance: float) -> int:
    """The rule best by `criterion` among those within the tolerance (the least bad if none)."""
    worst, mean = criterion(delta)
    feasible = worst >= -tolerance
    if feasible.any():
        return int(np.argmax(np.where(feasible, mean, -np.inf)))
    return int(np.argmax(worst))


def leave_one_out(delta: np.ndarray, rules: list[Rule], tolerance: float) -> list[int]:
    """For each repository: the rule chosen on the others."""
    return [choose(np.delete(delta, r, axis=1), rules, tolerance) for r in range(delta.shape[1])]


def report_rows(replay: Replay, named: dict[str, Rule | None], min_rest: int) -> dict:
    """Per N (issues after it) and per window: each named rule's figures (None: the cold model)."""
    truth = replay.stream.labels
    predicted = {name: replay.stream.scores.argmax(axis=1) if rule is None else replay.predict(rule)
                 for name, rule in named.items()}
    after = {size: {name: figures(truth[size:], p[size:]) for name, p in predicted.items()} | {
        "issues": len(truth) - size} for size in sizes_of(len(truth), min_rest)}
    windows = [{"from": lo, "to": hi, "issues": hi - lo,
                **{name: figures(truth[lo:hi], p[lo:hi]) for name, p in predicted.items()}}
               for lo, hi in windows_of(len(truth))]
    return {"issues": len(truth), "ordered_by": replay.stream.ordered_by,
            "kinds": {KINDS[c]: int(np.sum(truth == c)) for c in range(len(KINDS)) if (truth == c).any()},
            "after": after, "windows": windows}


def check_against_core(replay: Replay, rule: Rule, limit: int) -> float:
    """Share of the first `limit` issues on which core.memory.Memory.adjust (the served code, its
    constants) and this bench's vectorised `rule` pick the same kind: 1.0 when they are the same rule."""
    stream, predicted = replay.stream, replay.predict(rule)
    same = 0
    count = min(limit, len(stream.labels))
    for i in range(count):
        recalled = memory.Memory(stream.vectors[:i], [KINDS[c] for c in stream.labels[:i]],
                                 model_labels=[KINDS[c] for c in stream.scores[:i].argmax(axis=1)])
        scores = dict(zip(KINDS, map(float, stream.scores[i]), strict=True))
        adjusted = recalled.adjust(scores, stream.vectors[i]) if i else scores
        same += KINDS.index(max(adjusted, key=adjusted.get)) == predicted[i]
    return same / count


# ---- the report ----------------------------------------------------------------------------------------

def markdown(result: dict) -> str:
    columns = ("cold", "served before", "chosen without it")
    lines = [(f"The memory's rule, chosen leave-one-repository-out over {len(result['repositories'])} repositories "
              f"never trained on (served blend, TF-IDF share {result['share']:g}; {result['candidates']} "
              f"candidate rules; condition: macro-F1 never more than {result['tolerance'] * 100:g} point below "
              f"cold at a memory of {GUARDED_FROM} or more)"), "",
             f"Chosen on all repositories (what core.memory serves): **{result['chosen']['name']}**", "",
             f"Before: {SERVED_BEFORE.name}", "",
             "Rule chosen without each repository (leave-one-repository-out):", "",
             "| held out | rule chosen on the others |", "|---|---|"]
    lines += [f"| {repo} | {row['rule']} |" for repo, row in result["repositories"].items()]
    lines += ["", ("Issues after the first N at install (memory of N, growing as each is confirmed): "
                   "macro-F1 / accuracy"), "",
              "| repository | order | N | issues | " + " | ".join(columns) + " | Δ macro-F1 chosen | Δ acc chosen |",
              "|---" * (6 + len(columns)) + "|"]
    for repo, row in result["repositories"].items():
        for size, cells in row["after"].items():
            chosen, cold = cells["chosen without it"], cells["cold"]
            lines.append(f"| {repo} | {row['ordered_by']} | {size} | {cells['issues']} | "
                         + " | ".join(f"{cells[c]['macro_f1']:.3f} / {cells[c]['accuracy']:.3f}" for c in columns)
                         + f" | {(chosen['macro_f1'] - cold['macro_f1']) * 100:+.1f} | "
                         f"{(chosen['accuracy'] - cold['accuracy']) * 100:+.1f} |")
    lines += ["", "Mean over repositories having that N (each repository under the rule chosen without it)", "",
              "| N | repositories | " + " | ".join(f"{c} macro-F1" for c in columns) + " | "
              + " | ".join(f"{c} acc" for c in columns) + " | worst Δ macro-F1 chosen |",
              "|---" * (3 + 2 * len(columns)) + "|"]
    for row in result["summary"]:
        lines.append(f"| {row['N']} | {row['repositories']} | "
                     + " | ".join(f"{row[c]['macro_f1']:.3f}" for c in columns) + " | "
                     + " | ".join(f"{row[c]['accuracy']:.3f}" for c in columns)
                     + f" | {row['worst_delta_macro_f1'] * 100:+.1f} ({row['worst_repository']}) |")
    lines += ["", ("Per-kind F1 after the first N, all repositories' issues pooled (cold / served before / "
                   "chosen without it)"), "",
              "| N | issues | " + " | ".join(KINDS) + " |", "|---" * (2 + len(KINDS)) + "|"]
    for row in result["per_kind"]:
        lines.append(f"| {row['N']} | {row['issues']} | " + " | ".join(
            " / ".join(f"{row[c].get(kind, float('nan')):.3f}" for c in columns) for kind in KINDS) + " |")
    lines += ["", ("Windows (issues scored with a memory of from … to-1 issues): macro-F1 / accuracy, and "
                   "per-kind F1 of the rule chosen without the repository"), "",
              "| repository | window | issues | " + " | ".join(columns) + " | " + " | ".join(KINDS) + " |",
              "|---" * (3 + len(columns) + len(KINDS)) + "|"]
    for repo, row in result["repositories"].items():
        for window in row["windows"]:
            lines.append(f"| {repo} | {window['from']}–{window['to'] - 1} | {window['issues']} | "
                         + " | ".join(f"{window[c]['macro_f1']:.3f} / {window[c]['accuracy']:.3f}" for c in columns)
                         + " | " + " | ".join(f"{window['chosen without it']['per_kind'].get(k, float('nan')):.3f}"
                                              for k in KINDS) + " |")
    check = result["core_check"]
    lines += ["", (f"The bench against the served code: core.memory.Memory.adjust with its constants "
                   f"({check['rule']}) and this bench's replay of them pick the same kind on "
                   f"{check['agreement'] * 100:.1f} % of {check['repository']}'s first {check['issues']} issues."), ""]
    return "\n".join(lines)


def pooled_per_kind(replays: list[Replay], named_by_repo: dict[str, dict], min_rest: int) -> list[dict]:
    """Per N: each kind's F1 over all repositories' issues after the N, for each named rule."""
    rows = []
    for size in SIZES:
        kept = [r for r in replays if size in sizes_of(len(r.stream.labels), min_rest)]
        if not kept:
            continue
        truth = np.concatenate([r.stream.labels[size:] for r in kept])
        row = {"N": size, "issues": len(truth)}
        for name in next(iter(named_by_repo.values())):
            predicted = np.concatenate([
                (r.stream.scores.argmax(axis=1) if named_by_repo[r.stream.repo][name] is None
                 else r.predict(named_by_repo[r.stream.repo][name]))[size:] for r in kept])
            row[name] = figures(truth, predicted)["per_kind"]
        rows.append(row)
    return rows


def summary(repositories: dict, columns: tuple[str, ...]) -> list[dict]:
    rows = []
    for size in SIZES:
        having = {repo: row["after"][size] for repo, row in repositories.items() if size in row["after"]}
        if not having:
            continue
        row = {"N": size, "repositories": len(having)}
        for column in columns:
            row[column] = {metric: round(float(np.mean([cells[column][metric] for cells in having.values()])), 4)
                           for metric in ("macro_f1", "accuracy")}
        gaps = {repo: cells["chosen without it"]["macro_f1"] - cells["cold"]["macro_f1"]
                for repo, cells in having.items()}
        worst = min(gaps, key=gaps.get)
        rows.append(row | {"worst_delta_macro_f1": round(gaps[worst], 4), "worst_repository": worst})
    return rows


def main() -> int:
    from core.classifier import blend_scores

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_out_of_fold_arguments(parser)
    parser.add_argument("--min-rest", type=int, default=25, help="issues a repository must have after the N")
    parser.add_argument("--tolerance", type=float, default=0.01, help="the condition's macro-F1 margin below cold")
    parser.add_argument("--seed", type=int, default=42, help="the order of repositories without dates")
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "docs" / "quality")
    args = parser.parse_args()
    started = time.perf_counter()
    oof_path, vectors_path = args.workdir / "unseen-oof.json", args.workdir / "unseen-embeddings.npy"
    for path in (oof_path, vectors_path):
        if not path.is_file():
            parser.error(f"no {path}: run python -m bench.unseen --encoder fine-tune --workdir {args.workdir} first")
    oof = json.loads(oof_path.read_text())
    scores = blend_scores(oof["scores"]["encoder"], oof["scores"]["tfidf"], args.share)
    replays = [Replay(stream) for stream in streams(oof["pool"], scores, np.load(vectors_path), args.seed)]
    rules = candidates()
    print(f"{len(replays)} repositories, {len(rules)} rules", flush=True)
    delta = deltas(replays, rules, args.min_rest)
    chosen = choose(delta, rules, args.tolerance)
    held_out = leave_one_out(delta, rules, args.tolerance)
    columns = ("cold", "served before", "chosen without it")
    named = {r.stream.repo: dict(zip(columns, (None, SERVED_BEFORE, rules[held_out[i]]), strict=True))
             for i, r in enumerate(replays)}
    repositories = {}
    for i, replay in enumerate(replays):
        rule = rules[held_out[i]]
        repositories[replay.stream.repo] = {"rule": rule.name, "constants": asdict(rule),
                                            **report_rows(replay, named[replay.stream.repo], args.min_rest)}
    worst, mean = criterion(delta)
    longest, before = max(replays, key=lambda r: len(r.stream.labels)), rules.index(SERVED_BEFORE)
    result = run_record("memory_rule.py", {
        "wall_minutes": round((time.perf_counter() - started) / 60, 1), "share": args.share,
        "min_rest": args.min_rest, "tolerance": args.tolerance, "candidates": len(rules),
        "oof_written": dt.datetime.fromtimestamp(oof_path.stat().st_mtime, dt.UTC).isoformat(timespec="minutes"),
        "chosen": {"name": rules[chosen].name, "constants": asdict(rules[chosen]),
                   "worst_delta_macro_f1": round(float(worst[chosen]), 4), "criterion": round(float(mean[chosen]), 4)},
        "served_before": {"name": SERVED_BEFORE.name, "worst_delta_macro_f1": round(float(worst[before]), 4),
                          "criterion": round(float(mean[before]), 4)},
        "feasible_rules": int(np.sum(criterion(delta)[0] >= -args.tolerance)),
        "summary": summary(repositories, columns), "per_kind": pooled_per_kind(replays, named, args.min_rest),
        "core_check": {"repository": longest.stream.repo, "rule": core_rule().name,
                       "issues": min(300, len(longest.stream.labels)),
                       "agreement": check_against_core(longest, core_rule(), 300)},
        "repositories": repositories})
    result["wall_minutes"] = round((time.perf_counter() - started) / 60, 1)
    return write_report(args.out, "memory-rule", result, markdown(result))


def core_rule() -> Rule:
    """The rule core.memory's constants make."""
    return Rule(memory.NEIGHBOURS, memory.BALANCED_VOTE, memory.KNN_WEIGHT, memory.KNN_RAMP, memory.PRIOR_STRENGTH,
                memory.SELF_CHECK, memory.SELF_CHECK_GAIN)


if __name__ == "__main__":
    sys.exit(main())
