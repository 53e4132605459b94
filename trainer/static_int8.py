"""Static int8 for the fast path: the exported graph with int8 weights and int8 activations whose scales
are calibrated on issues of the kind the model serves (its training issues), as QuantizeLinear /
DequantizeLinear pairs around each Linear layer's MatMul: a plain ONNX graph that OpenVINO compiles into int8
kernels (AMX, VNNI).

Dynamic int8 (trainer.fast_path) measures each activation's range per batch at run time; static int8 fixes
it once, from calibration, so nothing is measured while serving. Only the Linear layers are quantised: the
attention's products of two activations stay in the engine's own precision, where int8 would cost accuracy
for little time.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from pathlib import Path

log = logging.getLogger(__name__)

CALIBRATION_ISSUES = 64  # issues, evenly spread over those given, each a batch of one as a labelling job runs


def calibration_sample(texts: Sequence[str], size: int = CALIBRATION_ISSUES) -> list[str]:
    """`size` texts evenly spread over `texts` (all of them when there are fewer), in their order."""
    if len(texts) <= size:
        return list(texts)
    step = len(texts) / size
    return [texts[int(i * step)] for i in range(size)]


def quantize_static_int8(exported: Path, target: Path, tokenizer, texts: Sequence[str], max_length: int) -> Path:
    """Write `exported` (the fp32 graph, unfused) to `target` with static int8 Linear layers, their
    activations' scales calibrated on `texts` tokenised as served (`max_length` tokens)."""
    import onnx
    from onnxruntime.quantization import CalibrationMethod, QuantFormat, QuantType, quantize_static

    if not texts:
        raise ValueError("static int8 needs calibration issues: none were given")
    model = onnx.load(str(exported))
    weights = {initializer.name for initializer in model.graph.initializer}
    linear = [node.name for node in model.graph.node
              if node.op_type == "MatMul" and any(name in weights for name in node.input)]
    inputs = [graph_input.name for graph_input in model.graph.input]
    logging.disable(logging.WARNING)  # quantize_static logs advice per tensor on the root logger
    try:
        quantize_static(str(exported), str(target), _Feeds(tokenizer, texts, max_length, inputs),
                        quant_format=QuantFormat.QDQ, op_types_to_quantize=["MatMul"], nodes_to_quantize=linear,
                        per_channel=True, activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8,
                        calibrate_method=CalibrationMethod.MinMax)
    finally:
        logging.disable(logging.NOTSET)
    return target


class _Feeds:
    """onnxruntime.quantization's CalibrationDataReader: one issue's inputs at a time, named as the graph's."""

    def __init__(self, tokenizer, texts: Sequence[str], max_length: int, inputs: Sequence[str]):
        import numpy as np

        def feed(text: str) -> dict:
            encoded = tokenizer([text], truncation=True, max_length=max_length, return_tensors="np")
            return {name: encoded[name].astype(np.int64) if name in encoded else
                    np.zeros_like(encoded["input_ids"], dtype=np.int64) for name in inputs}

        self._feeds: Iterator[dict] = map(feed, texts)

    def get_next(self) -> dict | None:
        return next(self._feeds, None)
