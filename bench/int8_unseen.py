"""The fast path's gate on repositories the model never saw: int8 against PyTorch, encoder alone and blended.

The gate runs on NLBSE'24's test split, whose repositories the bootstrap model trained on; this checks the same
rule where the App is used. It reuses bench/replay.py's starting models (MiniLM without the replayed repository),
blends each with a TF-IDF model trained on the same issues (share 0.7, as served), and scores the repository's
issues. Run bench/replay.py for both repositories first:

    .venv/bin/python bench/int8_unseen.py
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from core.card import ModelCard  # noqa: E402
from core.classifier import BlendedClassifier  # noqa: E402
from core.encoder import OnnxClassifier, TransformerClassifier  # noqa: E402
from tests.paths import NLBSE  # noqa: E402
from trainer.baseline import train_tfidf  # noqa: E402
from trainer.dataset import load_file  # noqa: E402
from trainer.evaluate import macro_f1, top_label  # noqa: E402
from trainer.fast_path import export_onnx  # noqa: E402

SHARE = 0.7  # TF-IDF's share, as served
REPLAYED = [("opencv/opencv", "base-without-opencv-opencv-128", "opencv-opencv-all.jsonl"),
            ("huggingface/datasets", "base-without-huggingface-datasets-128", "huggingface-datasets-all.jsonl")]


def tops(classifier, texts) -> list[str]:
    return [top_label(row) for row in classifier.predict(texts, batch_size=32)]


def agreement(first: list[str], second: list[str]) -> float:
    return round(sum(a == b for a, b in zip(first, second, strict=True)) / len(first), 4)


def check(repo: str, base: str, stream: str, root: Path) -> dict:
    """int8 against PyTorch on `repo`'s issues, the encoder alone and blended with TF-IDF."""
    work = root / f"int8-{base}"  # a copy, so the replay's own model directory is left as it was
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(root / base, work)
    shutil.rmtree(work / "fast", ignore_errors=True)
    artefacts = export_onnx(work)
    tfidf = train_tfidf([e for e in load_file(NLBSE / "issues_train.csv") if e.repo != repo]).classifier()
    issues = load_file(root / stream)
    texts, truth = [e.text for e in issues], [e.label for e in issues]
    card = ModelCard.read(work)
    pytorch = TransformerClassifier.from_directory(work, card, device="cpu")
    int8 = OnnxClassifier.from_file(work, artefacts["onnxruntime-int8"], card)
    blended = {name: tops(BlendedClassifier(encoder, tfidf, SHARE), texts)
               for name, encoder in (("pytorch", pytorch), ("int8", int8))}
    return {"repo": repo, "issues": len(texts),
            "encoder_agreement": agreement(tops(pytorch, texts), tops(int8, texts)),
            "blend_agreement": agreement(blended["pytorch"], blended["int8"]),
            "blend_macro_f1_pytorch": round(macro_f1(truth, blended["pytorch"], pytorch.labels), 4),
            "blend_macro_f1_int8": round(macro_f1(truth, blended["int8"], pytorch.labels), 4)}


def main() -> int:
    root = REPO_ROOT / "var" / "bench-replay"
    for repo, base, stream in REPLAYED:
        print(json.dumps(check(repo, base, stream, root)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
