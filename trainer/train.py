"""Fine-tune a pre-trained encoder with a classification head on labelled issues (the lesson's recipe).

Read top to bottom: load the base model → tokenise once → length-bucketed batches → AdamW with warm-up
and linear decay, gradient clipping, float16 autocast on CUDA → save weights, tokenizer and model card.
"""

from __future__ import annotations

import logging
import math
import time
import warnings
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from core.card import ModelCard, write_card
from core.issue_text import shorten_text
from trainer.config import TrainConfig
from trainer.dataset import Example

log = logging.getLogger(__name__)

BUCKET_POOL = 50  # batches per pool that are sorted by length together: pad-free, yet still shuffled


@dataclass
class TrainedModel:
    """A fine-tuned model in memory, with everything needed to save or score it."""

    model: Any  # transformers PreTrainedModel, in eval mode
    tokenizer: Any
    labels: list[str]
    config: TrainConfig
    base_model: str  # what was actually loaded (the resolved path or hub id)
    seconds: float  # wall time of the training loop
    steps: int = 0  # optimizer steps taken
    losses: list[float] = field(default_factory=list)  # training loss of each step
    precision: str = "fp32"  # what the CPU trained it in: fp32 | bf16 (autocast); on CUDA, fp32 weights
    precision_verdict: dict | None = None  # the CPU's verdict it followed, or why none (trainer.precision)
    device: str = "cpu"  # where it trained: cpu, or cuda (float16 autocast, `config.fp16`)
    step_seconds: list[float] = field(default_factory=list)  # wall time of each step

    def save(self, directory: Path | str, *, version: str, metrics: dict | None = None,
             thresholds: dict[str, float] | None = None, data_fingerprint: str = "") -> Path:
        """Write weights (safetensors), tokenizer and model card so `core.classifier.load_classifier` loads it."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        self.model.save_pretrained(directory)
        self.tokenizer.save_pretrained(directory)
        write_card(directory, version=version, labels=self.labels, kind="transformer", base_model=self.base_model,
                   max_length=self.config.max_length, thresholds=thresholds, metrics=metrics,
                   data_fingerprint=data_fingerprint, train_config=self.config.to_dict(),
                   training=self.training_record())
        return directory

    def training_record(self) -> dict:
        """The card's `training`: time, steps, loss, precision and device, with the CPU's verdict it followed."""
        record = {"seconds": round(self.seconds, 2), "steps": self.steps,
                  "final_loss": self.losses[-1] if self.losses else None, "precision": self.precision,
                  "device": self.device}
        if self.precision_verdict is not None:
            record["precision_verdict"] = self.precision_verdict
        return record

    def classifier(self, version: str = "unregistered"):
        """This model as a `core.encoder.TransformerClassifier`, without saving it first; its recipe in its
        card, so it cuts the text as the saved model will (`truncation`)."""
        from core.encoder import TransformerClassifier

        card = ModelCard(version=version, labels=self.labels, max_length=self.config.max_length,
                         base_model=self.base_model, extra={"train_config": self.config.to_dict()})
        return TransformerClassifier(self.model, self.tokenizer, card, str(self.model.device))


def fine_tune(config: TrainConfig, examples: Sequence[Example], labels: Sequence[str] | None = None,
              *, progress: bool = True, precision: str | None = None) -> TrainedModel:
    """Fine-tune `config.base_model` on `examples`; `labels` fixes the class order (default: sorted).

    `precision` fp32 or bf16 (CPU autocast); None: `config.precision`, where auto means fp32 here, since
    auto's bf16 is the CPU's verdict's to give (trainer.precision.fine_tune_for_cpu, which passes it in)."""
    import torch

    labels = check_labels(examples, labels)
    torch.manual_seed(config.seed)  # the new head's initialisation and dropout
    model, tokenizer = load_base(config, labels)
    input_ids = encode(tokenizer, [example.text for example in examples], config)
    targets = [labels.index(example.label) for example in examples]
    started = time.perf_counter()
    weights = class_weights(targets, len(labels)) if config.class_weight == "balanced" else None
    precision = precision or ("fp32" if config.precision == "auto" else config.precision)
    device = config.resolved_device()
    if device != "cpu":
        precision = "fp32"  # fp32 weights, float16 autocast on CUDA
    losses, step_seconds = train_loop(model, tokenizer, input_ids, targets, config, progress, weights, precision)
    seconds = time.perf_counter() - started
    log.info("fine-tuned %s on %d examples: %d steps on %s in %.1f s (%s)", config.resolved_base_model(),
             len(examples), len(losses), device, seconds, precision)
    return TrainedModel(model.eval(), tokenizer, labels, config, config.resolved_base_model(), seconds,
                        len(losses), losses, precision, device=device, step_seconds=step_seconds)


def check_labels(examples: Sequence[Example], labels: Sequence[str] | None) -> list[str]:
    """The class list, checked against the examples before any expensive loading."""
    if not examples:
        raise ValueError("no training examples: check the data file or the database scope")
    present = sorted({example.label for example in examples})
    labels = list(labels) if labels is not None else present
    unknown = sorted(set(present) - set(labels))
    if unknown:
        raise ValueError(f"examples have labels {unknown} outside labels={labels}: "
                         "add them or drop those rows")
    if len(labels) < 2:
        raise ValueError(f"need at least two labels to train a classifier, got {labels}")
    return labels


def load_base(config: TrainConfig, labels: list[str]):
    """Tokenizer and encoder with a fresh classification head, from a hub id or a local directory."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    source = config.resolved_base_model()
    try:
        tokenizer = AutoTokenizer.from_pretrained(source)
        model = AutoModelForSequenceClassification.from_pretrained(
            source, num_labels=len(labels), id2label=dict(enumerate(labels)),
            label2id={label: i for i, label in enumerate(labels)},
            ignore_mismatched_sizes=True,  # a fine-tuned base with another label set gets a fresh head
            use_safetensors=True)  # never a pickled checkpoint: torch.load of a .bin runs its code
    except OSError as error:  # the hub is unreachable or the directory is not a model
        raise ValueError(f"cannot load base model {source!r} ({error}); pass a local model directory, "
                         "or a hub id on a machine that can reach huggingface.co") from error
    positions = getattr(model.config, "max_position_embeddings", None)
    if positions and config.max_length > positions:
        raise ValueError(f"max_length {config.max_length} exceeds {source}'s {positions} positions")
    # some checkpoints are stored in float16; train in float32 (autocast handles CUDA speed)
    return model.float().to(config.resolved_device()), tokenizer


def class_weights(targets: Sequence[int], classes: int) -> list[float]:
    """n / (kinds present × count) per class index (sklearn's "balanced"); 0 for a class with no example."""
    counts = Counter(targets)
    return [len(targets) / (len(counts) * counts[c]) if counts[c] else 0.0 for c in range(classes)]


def encode(tokenizer, texts: Sequence[str], config: TrainConfig) -> list[list[int]]:
    """Token ids of each text, cut to max_length the way `config.truncation` says."""
    if config.truncation == "head+tail":
        texts = [shorten_text(text, tokenizer, config.max_length) for text in texts]
    return tokenizer(list(texts), truncation=True, max_length=config.max_length)["input_ids"]


def length_buckets(lengths: Sequence[int], batch_size: int, generator) -> list[list[int]]:
    """Batches of indices of similar length, in random order (1.2–1.7× faster on CPU: STACK-NOTES)."""
    import torch

    order = torch.randperm(len(lengths), generator=generator).tolist()
    pool = batch_size * BUCKET_POOL
    batches = []
    for start in range(0, len(order), pool):
        chunk = sorted(order[start:start + pool], key=lambda i: lengths[i])
        batches += [chunk[k:k + batch_size] for k in range(0, len(chunk), batch_size)]
    return [batches[i] for i in torch.randperm(len(batches), generator=generator).tolist()]


def linear_schedule(optimizer, total_steps: int, warmup_ratio: float):
    """Linear warm-up over warmup_ratio of the steps, then linear decay to zero (the lesson's rate)."""
    import torch

    warmup = max(1, int(total_steps * warmup_ratio))

    def rate(step: int) -> float:
        return min((step + 1) / warmup, max(0.0, (total_steps - step) / max(1, total_steps - warmup)))

    return torch.optim.lr_scheduler.LambdaLR(optimizer, rate)


def adamw(model, config: TrainConfig, device: str):
    """AdamW over the model's weights, with PyTorch's fused kernel where it has one for the device: the same
    update to float rounding, where CPU's default loops over the tensors one by one (MiniLM's 22.7M weights:
    16 against 71 ms a step on 2 AMX cores, docs/BENCHMARKS.md "The served model")."""
    import torch

    fused = torch.device(device).type in ("cpu", "cuda")
    return torch.optim.AdamW(model.parameters(), lr=config.lr, weight_decay=config.weight_decay, fused=fused)


def train_loop(model, tokenizer, input_ids: list[list[int]], targets: list[int], config: TrainConfig,
               progress: bool, weights: Sequence[float] | None = None, precision: str = "fp32"
               ) -> tuple[list[float], list[float]]:
    """Run the optimizer over the epochs (or max_steps); returns each step's loss and its seconds.
    `weights`, one per class, scale each class's share of the loss (None: all alike)."""
    import torch
    import torch.nn.functional as F
    from tqdm.auto import tqdm

    total = config.epochs * math.ceil(len(input_ids) / config.batch_size)  # optimizer steps
    total = min(total, config.max_steps) if config.max_steps else total
    device = config.resolved_device()
    optimizer = adamw(model, config, device)
    schedule = linear_schedule(optimizer, total, config.warmup_ratio)
    weights = None if weights is None else torch.tensor(weights, dtype=torch.float32, device=device)
    amp = config.fp16 and device.startswith("cuda")  # float16 autocast only on CUDA
    scaler = torch.amp.GradScaler("cuda", enabled=amp)
    # bfloat16 autocast on CPU needs no scaler (fp32's range)
    autocast = (torch.autocast("cuda", dtype=torch.float16) if amp else
                torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bf16" and device == "cpu"))

    def step(batch: list[int]) -> float:
        """One optimizer step: autocast forward, scaled backward, clip, step, schedule."""
        encoded = tokenizer.pad({"input_ids": [input_ids[i] for i in batch]}, return_tensors="pt").to(device)
        with autocast:
            loss = F.cross_entropy(model(**encoded).logits.float(),
                                   torch.tensor([targets[i] for i in batch], device=device), weight=weights)
        optimizer.zero_grad(set_to_none=True)
        scaler.scale(loss).backward()
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(model.parameters(), config.grad_clip)
        scaler.step(optimizer)
        scaler.update()
        with warnings.catch_warnings():
            # the scaler skips a step when a float16 gradient overflows; PyTorch then warns about the order
            warnings.filterwarnings("ignore", message="Detected call of `lr_scheduler.step")
            schedule.step()
        return float(loss.detach())

    generator = torch.Generator().manual_seed(config.seed)  # batch order, independent of other RNG use
    lengths = [len(ids) for ids in input_ids]
    losses: list[float] = []
    step_seconds: list[float] = []
    model.train()
    with tqdm(total=total, disable=not progress, desc="fine-tuning", unit="step") as bar:
        for _ in range(config.epochs):
            for batch in length_buckets(lengths, config.batch_size, generator):
                if len(losses) == total:
                    return losses, step_seconds
                started = time.perf_counter()
                losses.append(step(batch))
                step_seconds.append(time.perf_counter() - started)
                bar.update(1)
                bar.set_postfix(loss=f"{losses[-1]:.3f}")
    return losses, step_seconds
