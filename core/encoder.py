"""A fine-tuned encoder at inference: PyTorch (fp32, or bf16 autocast), or its checked ONNX artefacts run by
ONNX Runtime or OpenVINO.

`trainer.fast_path` builds `fast/model.int8.onnx` and the fused fp32 graph when a trained model is
registered, gates each engine (and bf16 autocast) against fp32 PyTorch, and records in the card
(`fast_path`) the SHA-256 of each artefact kept and every gate's figures. `load_encoder` serves the engine
`core.engines.choose` picks for this CPU among those the gate allowed (an artefact only when it is there and
its hash matches); each engine passed over is logged with why. The ONNX engines import neither torch nor the
model classes of transformers: a worker serving them starts faster and holds less memory. OpenVINO runs the
fused fp32 graph in bf16 where the CPU has bf16 instructions (`openvino-bf16`), and the statically quantised
graph (`openvino-int8`: int8 weights and activations, calibrated on training issues, trainer.static_int8).

torch, transformers, onnxruntime and openvino are imported inside functions only: the web process may import
this module's names without paying for them.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from pathlib import Path

from core import engines
from core.card import ModelCard
from core.file_hash import file_sha256
from core.issue_text import shorten_text

log = logging.getLogger(__name__)

SERVES = engines.ORT_INT8  # the card's `fast_path.serves` for each artefact
SERVES_FP32 = engines.ORT_FP32


class EncoderClassifier:
    """What every way of running a fine-tuned encoder shares: the text cut as the model was trained on it,
    length-sorted batches, class probabilities and mean-pooled embeddings from one forward pass.

    Subclasses run one batch (`_forward`): PyTorch (`TransformerClassifier`) or ONNX Runtime (`OnnxClassifier`).
    """

    engine = "pytorch"  # which way it runs, as the model card and the logs name it

    def __init__(self, tokenizer, card: ModelCard):
        self.tokenizer, self.card = tokenizer, card
        self.version, self.labels = card.version, list(card.labels)
        # serve the text cut the way the model was trained on it
        self.head_and_tail = card.train_config.get("truncation") == "head+tail"

    def predict(self, texts: Sequence[str], batch_size: int = 16) -> list[dict[str, float]]:
        return self.predict_and_embed(texts, batch_size)[0]

    def embed(self, texts: Sequence[str], batch_size: int = 16) -> list[list[float]]:
        """One L2-normalised vector per text: the encoder's last hidden state, mean-pooled over its tokens."""
        return self._run(texts, batch_size, scores=False)[1]

    def predict_and_embed(self, texts: Sequence[str], batch_size: int = 16
                          ) -> tuple[list[dict[str, float]], list[list[float]]]:
        """predict() and embed() from one forward pass per batch."""
        return self._run(texts, batch_size, scores=True)

    def _run(self, texts: Sequence[str], batch_size: int, *, scores: bool
             ) -> tuple[list[dict[str, float]], list[list[float]]]:
        # Sorting by length makes batches nearly pad-free: 1.2-1.7x faster on CPU (STACK-NOTES).
        if self.head_and_tail:
            texts = [shorten_text(text, self.tokenizer, self.card.max_length) for text in texts]
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        results: list[dict[str, float]] = [{} for _ in texts]
        vectors: list[list[float]] = [[] for _ in texts]
        for start in range(0, len(order), batch_size):
            chunk = order[start:start + batch_size]
            hidden, probabilities = self._forward([texts[i] for i in chunk], scores)
            for position, i in enumerate(chunk):
                vectors[i] = hidden[position]
                if scores:
                    results[i] = dict(zip(self.labels, probabilities[position], strict=True))
        return results, vectors

    def _encode(self, texts: list[str], tensors: str):
        return self.tokenizer(texts, truncation=True, padding=True, max_length=self.card.max_length,
                              return_tensors=tensors)

    def _forward(self, texts: list[str], scores: bool) -> tuple[list[list[float]], list[list[float]]]:
        """(mean-pooled, normalised last hidden states, class probabilities or []) of one batch."""
        raise NotImplementedError


class TransformerClassifier(EncoderClassifier):
    """A fine-tuned encoder with its tokenizer in PyTorch, on CPU (or CUDA when there is one); `bf16`: under
    autocast to bfloat16 on its device (engine `pytorch-bf16`), the weights kept in fp32."""

    def __init__(self, model, tokenizer, card: ModelCard, device: str = "cpu", *, bf16: bool = False):
        super().__init__(tokenizer, card)
        self.model, self.device, self.bf16 = model, device, bf16
        self.engine = engines.TORCH_BF16 if bf16 else engines.TORCH_FP32

    @classmethod
    def from_directory(cls, directory: Path | str, card: ModelCard, device: str | None = None, *,
                       bf16: bool = False) -> TransformerClassifier:
        """The model saved in `directory`, whose card the caller has read (core.classifier.load_classifier)."""
        import torch
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        directory = Path(directory)
        device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        tokenizer = AutoTokenizer.from_pretrained(directory)
        # safetensors only: a pytorch_model.bin would go through torch.load, which unpickles (runs code)
        model = AutoModelForSequenceClassification.from_pretrained(directory, use_safetensors=True).to(device).eval()
        return cls(model, tokenizer, card, device, bf16=bf16)

    def _forward(self, texts: list[str], scores: bool) -> tuple[list[list[float]], list[list[float]]]:
        import torch

        # bf16 autocast where the model runs: a CPU autocast would leave a model on CUDA in fp32
        with torch.inference_mode(), torch.autocast(torch.device(self.device).type, dtype=torch.bfloat16,
                                                    enabled=self.bf16):
            encoded = self._encode(texts, "pt").to(self.device)
            if scores:
                output = self.model(**encoded, output_hidden_states=True)
                hidden, probabilities = output.hidden_states[-1], output.logits.float().softmax(-1).cpu().tolist()
            else:  # the encoder alone, without the classification head
                hidden, probabilities = self.model.base_model(**encoded).last_hidden_state, []
            mask = encoded["attention_mask"].unsqueeze(-1).to(hidden.dtype)
            pooled = ((hidden * mask).sum(1) / mask.sum(1).clamp(min=1)).float()
            return pooled.div(pooled.norm(dim=-1, keepdim=True).clamp(min=1e-12)).cpu().tolist(), probabilities


class OnnxClassifier(EncoderClassifier):
    """The encoder run by ONNX Runtime; same text cut, batches, scores and embeddings as PyTorch's."""

    engine = SERVES

    def __init__(self, session, tokenizer, card: ModelCard, path: Path, engine: str = SERVES):
        super().__init__(tokenizer, card)
        self.session, self.path, self.engine = session, path, engine
        self.input_names = [graph_input.name for graph_input in session.get_inputs()]

    @classmethod
    def from_file(cls, directory: Path | str, path: Path, card: ModelCard, *, threads: int | None = None,
                  engine: str = SERVES) -> OnnxClassifier:
        """The graph at `path`, with the tokenizer of the encoder in `directory`, whose card is `card`."""
        import onnxruntime

        # the tokenizers-backed class itself: AutoTokenizer would import torch (transformers 5)
        from transformers import PreTrainedTokenizerFast

        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = threads or 0  # 0: ORT's default, one per physical core
        options.inter_op_num_threads = 1
        session = onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        return cls(session, PreTrainedTokenizerFast.from_pretrained(directory), card, path, engine)

    def _forward(self, texts: list[str], scores: bool) -> tuple[list[list[float]], list[list[float]]]:
        import numpy as np

        encoded = self._encode(texts, "np")
        # fed by name: the tokenizer's key order is not the graph's input order. A BERT tokenizer loaded
        # without its model class gives no token_type_ids; the model reads none as all zeros.
        feed = {name: encoded[name].astype(np.int64) if name in encoded else
                np.zeros_like(encoded["input_ids"], dtype=np.int64) for name in self.input_names}
        logits, hidden = self._run_graph(feed)
        mask = encoded["attention_mask"][..., None].astype(np.float32)
        pooled = (hidden * mask).sum(1) / np.maximum(mask.sum(1), 1)
        pooled /= np.maximum(np.linalg.norm(pooled, axis=-1, keepdims=True), 1e-12)
        probabilities = []
        if scores:
            shifted = np.exp(logits - logits.max(-1, keepdims=True))
            probabilities = (shifted / shifted.sum(-1, keepdims=True)).tolist()
        return pooled.tolist(), probabilities

    def _run_graph(self, feed: dict):
        """(logits, last hidden state) of the graph on one batch's inputs."""
        return self.session.run(["logits", "last_hidden_state"], feed)


class OpenVinoClassifier(OnnxClassifier):
    """The encoder's ONNX graph compiled by OpenVINO for this CPU: `openvino-bf16` runs the fused fp32 graph
    in bf16 (AMX or AVX-512 BF16), `openvino-int8` the statically quantised one."""

    def __init__(self, compiled, tokenizer, card: ModelCard, path: Path, engine: str):
        EncoderClassifier.__init__(self, tokenizer, card)
        self.session, self.path, self.engine = compiled, path, engine
        self.input_names = [graph_input.any_name for graph_input in compiled.inputs]
        self._request = compiled.create_infer_request()
        self._lock = threading.Lock()  # one infer request, reused: one batch at a time

    @classmethod
    def from_file(cls, directory: Path | str, path: Path, card: ModelCard, *, threads: int | None = None,
                  engine: str = engines.OV_BF16) -> OpenVinoClassifier:
        """The graph at `path` compiled for this CPU, with the tokenizer of the encoder in `directory`."""
        import openvino
        from transformers import PreTrainedTokenizerFast

        config = {"PERFORMANCE_HINT": "LATENCY"}  # one request at a time, as a labelling job runs
        if engines.TABLE[engine].bf16:
            config["INFERENCE_PRECISION_HINT"] = "bf16"
        if threads:
            config["INFERENCE_NUM_THREADS"] = threads
        compiled = openvino.Core().compile_model(str(path), "CPU", config)
        return cls(compiled, PreTrainedTokenizerFast.from_pretrained(directory), card, path, engine)

    def _run_graph(self, feed: dict):
        with self._lock:
            outputs = self._request.infer(feed)
            return outputs["logits"].copy(), outputs["last_hidden_state"].copy()


def load_encoder(directory: Path | str, card: ModelCard, *, threads: int | None = None,
                 engine: str = engines.AUTO, hardware: engines.Hardware | None = None) -> EncoderClassifier:
    """The encoder run by the fastest engine this CPU has among those its registration's gate allowed
    (`core.engines.choose`); `engine` forces one (ISSUE_SORTER_ENGINE), which still needs its gate.

    `threads` caps the CPU threads inference uses (a bot worker's ISSUE_SORTER_WORKER_THREADS); None: the
    engine's default. `hardware`: the machine's (None: this one).
    """
    directory = Path(directory)
    return engines.choose(card, lambda name: load_engine(directory, card, name, threads=threads),
                          forced=engine, hardware=hardware).classifier


def load_engine(directory: Path, card: ModelCard, engine: str, *, threads: int | None = None
                ) -> EncoderClassifier:
    """The encoder in `directory` run by `engine`; raises, saying why, when it cannot be loaded here."""
    if engines.TABLE[engine].graph:
        kept = engines.artefacts(card)[engine]
        path = directory / kept["file"]
        if not path.is_file():
            raise FileNotFoundError(f"its fast artefact {path} is missing")
        if file_sha256(path) != kept.get("sha256"):
            raise ValueError(f"its fast artefact {path} does not match the SHA-256 in its card (corrupt or replaced)")
        return graph_classifier(directory, path, card, engine, threads=threads)
    if threads is not None:
        import torch

        torch.set_num_threads(threads)
    return TransformerClassifier.from_directory(directory, card, bf16=engines.TABLE[engine].bf16)


def graph_classifier(directory: Path, path: Path, card: ModelCard, engine: str, *, threads: int | None = None
                     ) -> OnnxClassifier:
    """The ONNX graph at `path` run by `engine` (OpenVINO or ONNX Runtime, as its table entry says)."""
    runner = OpenVinoClassifier if engines.TABLE[engine].openvino else OnnxClassifier
    return runner.from_file(directory, path, card, threads=threads, engine=engine)
