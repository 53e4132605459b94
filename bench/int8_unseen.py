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

from core.classifier import BlendedClassifier, TransformerClassifier  # noqa: E402
from core.fast_path import OnnxClassifier  # noqa: E402
from tests.paths import NLBSE  # noqa: E402
from trainer.baseline import train_tfidf  # noqa: E402
from trainer.dataset import load_file  # noqa: E402
from trainer.evaluate import macro_f1  # noqa: E402
from trainer.fast_path import export_onnx  # noqa: E402


def top(rows): return [max(r, key=r.get) for r in rows]
for repo, base, stream in [("opencv/opencv", "base-without-opencv-opencv-128", "opencv-opencv-all.jsonl"),
                           ("huggingface/datasets", "base-without-huggingface-datasets-128", "huggingface-datasets-all.jsonl")]:
    root = REPO_ROOT / "var" / "bench-replay"
    work = root / f"int8-{base}"; shutil.rmtree(work, ignore_errors=True); shutil.copytree(root / base, work)
    shutil.rmtree(work / "fast", ignore_errors=True)
    arts = export_onnx(work)
    train = [e for e in load_file(NLBSE / "issues_train.csv") if e.repo != repo]
    tfidf = train_tfidf(train).classifier()
    issues = [e for e in load_file(root / stream)]
    texts, truth = [e.text for e in issues], [e.label for e in issues]
    torch_enc = TransformerClassifier.from_directory(work, device="cpu")
    ref = top(BlendedClassifier(torch_enc, tfidf, 0.7).predict(texts, batch_size=32))
    ref_enc = top(torch_enc.predict(texts, batch_size=32))
    int8 = OnnxClassifier.from_file(work, arts["onnxruntime-int8"])
    fast = top(BlendedClassifier(int8, tfidf, 0.7).predict(texts, batch_size=32))
    fast_enc = top(int8.predict(texts, batch_size=32))
    agree = lambda a, b: round(sum(x == y for x, y in zip(a, b)) / len(a), 4)
    labels = torch_enc.labels
    print(json.dumps({"repo": repo, "issues": len(texts), "encoder_agreement": agree(ref_enc, fast_enc),
                      "blend_agreement": agree(ref, fast), "blend_macro_f1_pytorch": round(macro_f1(truth, ref, labels), 4),
                      "blend_macro_f1_int8": round(macro_f1(truth, fast, labels), 4)}))
