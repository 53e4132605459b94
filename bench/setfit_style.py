"""SetFit-style training (Tunstall et al., 2022), the method behind NLBSE'24's best published baseline.

Contrastive step: the sentence encoder learns from pairs of issues, pulled together when they share a
label and pushed apart when not (cosine similarity regressed on 1 / 0). Then a logistic regression is
fitted on the tuned encoder's mean-pooled embeddings. SetFit's defaults except the pair count: its 20
iterations make 40 pairs per issue; 2 keep a repository's run to about 1.5 minutes on 2 CPU cores.

Used by bench/quality.py as an ablation (on MiniLM it did not beat plain fine-tuning, docs/BENCHMARKS.md, so
it is not part of the trainer) and, for `embed`, by bench/unseen.py's frozen encoder.
"""

from __future__ import annotations

import random
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

BODY_LR = 2e-5  # SetFit's body learning rate
PAIRS_PER_ISSUE = 2  # one positive and one negative pair per round; SetFit's default: 20 rounds
BATCH_SIZE = 16


@dataclass
class SetFitStyle:
    """The tuned encoder and the logistic-regression head; `predict` answers like a bot Classifier."""

    model: Any
    tokenizer: Any
    head: Any
    labels: list[str]
    max_length: int
    seconds: float
    version: str = "setfit-style"

    def embed(self, texts: Sequence[str], batch_size: int = 32):
        return embed(self.model, self.tokenizer, texts, self.max_length, batch_size)

    def predict(self, texts: Sequence[str]) -> list[dict[str, float]]:
        classes = list(self.head.classes_)
        return [dict(zip(classes, map(float, row), strict=True))
                for row in self.head.predict_proba(self.embed(list(texts)))]


def embed(model, tokenizer, texts: Sequence[str], max_length: int, batch_size: int = 32):
    """The texts' mean-pooled, normalised embeddings (as sentence-transformers computes them), in eval mode."""
    import numpy as np
    import torch

    model.eval()
    with torch.inference_mode():
        # .float(): under bf16 autocast the pooled rows are bfloat16, which numpy has no type for
        return np.concatenate([mean_pool(model, tokenizer, texts[start:start + batch_size], max_length)
                               .float().numpy() for start in range(0, len(texts), batch_size)])


def mean_pool(model, tokenizer, texts: Sequence[str], max_length: int):
    import torch

    encoded = tokenizer(list(texts), truncation=True, max_length=max_length, padding=True,
                        return_tensors="pt")
    hidden = model(**encoded).last_hidden_state
    mask = encoded["attention_mask"].unsqueeze(-1).to(hidden.dtype)
    pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
    return torch.nn.functional.normalize(pooled, dim=-1)


def contrastive_pairs(labels: Sequence[str], rounds: int, rng: random.Random) -> list[tuple[int, int, float]]:
    """Per round and issue: one partner with the same label (1.0) and one with another label (0.0)."""
    by_label: dict[str, list[int]] = {}
    for i, label in enumerate(labels):
        by_label.setdefault(label, []).append(i)
    pairs = []
    for _ in range(rounds):
        for i, label in enumerate(labels):
            others = [j for j in by_label[label] if j != i]
            different = [j for other, idx in by_label.items() if other != label for j in idx]
            if others:
                pairs.append((i, rng.choice(others), 1.0))
            if different:
                pairs.append((i, rng.choice(different), 0.0))
    rng.shuffle(pairs)
    return pairs


def train_setfit_style(base_model: str, texts: Sequence[str], labels: Sequence[str], *, max_length: int = 128,
                       rounds: int = PAIRS_PER_ISSUE // 2, seed: int = 42) -> SetFitStyle:
    """Contrastive tuning of `base_model` on pairs of `texts`, then a logistic-regression head."""
    import torch
    from sklearn.linear_model import LogisticRegression
    from transformers import AutoModel, AutoTokenizer

    torch.manual_seed(seed)
    tokenizer, model = AutoTokenizer.from_pretrained(base_model), AutoModel.from_pretrained(base_model)
    pairs = contrastive_pairs(labels, rounds, random.Random(seed))
    optimizer = torch.optim.AdamW(model.parameters(), lr=BODY_LR)
    steps = (len(pairs) + BATCH_SIZE - 1) // BATCH_SIZE
    warmup = max(1, steps // 10)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: min((step + 1) / warmup, max(0.0, (steps - step) / max(1, steps - warmup))))
    started = time.perf_counter()
    model.train()
    for start in range(0, len(pairs), BATCH_SIZE):
        batch = pairs[start:start + BATCH_SIZE]
        left = mean_pool(model, tokenizer, [texts[i] for i, _, _ in batch], max_length)
        right = mean_pool(model, tokenizer, [texts[j] for _, j, _ in batch], max_length)
        target = torch.tensor([similar for _, _, similar in batch])
        loss = torch.nn.functional.mse_loss((left * right).sum(-1), target)
        loss.backward()
        optimizer.step()
        schedule.step()
        optimizer.zero_grad()
    tuned = fit_head(model, tokenizer, texts, labels, LogisticRegression(max_iter=2000), max_length=max_length)
    tuned.seconds = time.perf_counter() - started
    return tuned


def fit_head(model, tokenizer, texts: Sequence[str], labels: Sequence[str], head, *,
             max_length: int = 128) -> SetFitStyle:
    """`head` (an sklearn classifier) fitted on `model`'s mean-pooled embeddings of `texts`."""
    started = time.perf_counter()
    fitted = SetFitStyle(model, tokenizer, None, sorted(set(labels)), max_length, 0.0)
    fitted.head = head.fit(fitted.embed(list(texts)), list(labels))
    fitted.seconds = time.perf_counter() - started
    return fitted
