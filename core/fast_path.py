"""The fast serving path: a registered encoder's ONNX Runtime int8 artefact, checked before it serves.

`trainer.fast_path` builds `fast/model.int8.onnx` when a model is registered and records in the card
(`fast_path`) its SHA-256 and the same-answers gate's figures. Here it is loaded only when the file is there,
its hash matches and the gate passed; `load` says why not otherwise, and PyTorch serves. This path imports
neither torch nor the model classes of transformers: a worker serving it starts faster and holds less memory.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from core.card import ModelCard
from core.classifier import EncoderClassifier

FAST_DIR = "fast"  # the artefact's subdirectory in an encoder's version directory
FAST_FILE = "model.int8.onnx"  # fused graph, dynamic int8 weights (per channel)
FP32_FILE = "model.fp32.onnx"  # the same fused graph in fp32: serves when int8 fails the gate
SERVES = "onnxruntime-int8"  # the card's `fast_path.serves` for each artefact
SERVES_FP32 = "onnxruntime-fp32"


def file_sha256(path: Path | str) -> str:
    """The SHA-256 of a file, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def load(directory: Path, card: ModelCard, *, threads: int | None = None
         ) -> tuple[OnnxClassifier | None, str]:
    """(the fast classifier, "") when it may serve; else (None, why not) in one line."""
    record = (card.extra or {}).get("fast_path")
    if not record:
        return None, "no fast artefact was built for it (registered before the fast path, or with it off)"
    if record.get("error"):
        return None, f"its fast artefact could not be built ({record['error']})"
    gate = record.get("gate") or record.get("gates", {}).get(SERVES) or {}
    if record.get("serves") not in (SERVES, SERVES_FP32) or not gate.get("passed"):
        return None, f"its fast artefact did not pass the same-answers gate ({_gate_text(gate)})"
    path = directory / record["file"]
    if not path.is_file():
        return None, f"its fast artefact {path} is missing"
    if file_sha256(path) != record.get("sha256"):
        return None, f"its fast artefact {path} does not match the SHA-256 in its card (corrupt or replaced)"
    try:
        return OnnxClassifier.from_file(directory, path, threads=threads, engine=record["serves"]), ""
    except ImportError as error:
        return None, f"onnxruntime is not installed ({error})"
    except Exception as error:  # noqa: BLE001 - ORT raises its own errors for a bad graph; PyTorch still serves
        return None, f"its fast artefact {path} could not be loaded ({type(error).__name__}: {error})"


def _gate_text(gate: dict) -> str:
    if "top_label_agreement" not in gate:
        return gate.get("reason", "not run")
    return (f"top label agreed on {gate['top_label_agreement']:.1%} of {gate['issues']} issues, macro-F1 "
            f"{gate['macro_f1_fast']:.4f} against PyTorch's {gate['macro_f1_pytorch']:.4f}")


class OnnxClassifier(EncoderClassifier):
    """The encoder run by ONNX Runtime; same text cut, batches, scores and embeddings as PyTorch's."""

    engine = SERVES

    def __init__(self, session, tokenizer, card: ModelCard, path: Path, engine: str = SERVES):
        super().__init__(tokenizer, card)
        self.session, self.path, self.engine = session, path, engine
        self.input_names = [graph_input.name for graph_input in session.get_inputs()]

    @classmethod
    def from_file(cls, directory: Path, path: Path, *, threads: int | None = None,
                  engine: str = SERVES) -> OnnxClassifier:
        import onnxruntime
        # the tokenizers-backed class itself: AutoTokenizer would import torch (transformers 5)
        from transformers import PreTrainedTokenizerFast

        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = threads or 0  # 0: ORT's default, one per physical core
        options.inter_op_num_threads = 1
        session = onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        tokenizer = PreTrainedTokenizerFast.from_pretrained(directory)
        return cls(session, tokenizer, ModelCard.read(directory), path, engine)

    def _forward(self, texts: list[str], scores: bool) -> tuple[list[list[float]], list[list[float]]]:
        import numpy as np

        encoded = self._encode(texts, "np")
        # fed by name: the tokenizer's key order is not the graph's input order. A BERT tokenizer loaded
        # without its model class gives no token_type_ids; the model reads none as all zeros.
        feed = {name: encoded[name].astype(np.int64) if name in encoded else
                np.zeros_like(encoded["input_ids"], dtype=np.int64) for name in self.input_names}
        logits, hidden = self.session.run(["logits", "last_hidden_state"], feed)
        mask = encoded["attention_mask"][..., None].astype(np.float32)
        pooled = (hidden * mask).sum(1) / np.maximum(mask.sum(1), 1)
        pooled /= np.maximum(np.linalg.norm(pooled, axis=-1, keepdims=True), 1e-12)
        probabilities = []
        if scores:
            shifted = np.exp(logits - logits.max(-1, keepdims=True))
            probabilities = (shifted / shifted.sum(-1, keepdims=True)).tolist()
        return pooled.tolist(), probabilities
