"""The TF-IDF model on disk without pickle: parameters and vocabularies as JSON, arrays as .npy files.

A pickle runs code when loaded, so whoever can write MODEL_DIR would run code in the worker, which holds
the App's key. These files hold data only: `load_pipeline` rebuilds the sklearn Pipeline from them
(numpy with allow_pickle=False), and its predict_proba equals the saved one's exactly.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

TFIDF_FILE = "tfidf.json"  # the pipeline's parameters, vocabularies and labels
ARRAY_FILE = "tfidf-{}.npy"  # each vectorizer's idf, the classifier's coefficients and intercepts
FORMAT = 1


def save_pipeline(pipeline: Any, directory: Path) -> None:
    """Write a fitted Pipeline(features=FeatureUnion(TfidfVectorizer...), classifier=LogisticRegression)."""
    import numpy as np

    union, classifier = pipeline.named_steps["features"], pipeline.named_steps["classifier"]
    features = []
    for name, vectorizer in union.transformer_list:
        _save_array(directory, f"{name}-idf", vectorizer.idf_)
        features.append({"name": name, "params": _plain_params(vectorizer.get_params()),
                         "vocabulary": {term: int(index) for term, index in vectorizer.vocabulary_.items()}})
    _save_array(directory, "coef", classifier.coef_)
    _save_array(directory, "intercept", classifier.intercept_)
    spec = {"format": FORMAT, "features": features, "union_weights": union.transformer_weights,
            "classifier": {"params": _plain_params(classifier.get_params()),
                           "classes": [str(label) for label in classifier.classes_],
                           "n_features_in": int(classifier.n_features_in_)},
            "dtype": np.dtype(classifier.coef_.dtype).name}
    (directory / TFIDF_FILE).write_text(json.dumps(spec, ensure_ascii=False))


def load_pipeline(directory: Path) -> Any:
    """The Pipeline that `save_pipeline` wrote, rebuilt from data alone."""
    import numpy as np
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import FeatureUnion, Pipeline

    spec = json.loads((directory / TFIDF_FILE).read_text())
    if spec.get("format") != FORMAT:
        raise ValueError(f"{directory / TFIDF_FILE} is format {spec.get('format')!r}; this version reads {FORMAT}")
    transformers = []
    for feature in spec["features"]:
        params = feature["params"] | {"ngram_range": tuple(feature["params"]["ngram_range"]),
                                      "dtype": np.dtype(feature["params"]["dtype"])}
        vectorizer = TfidfVectorizer(**params)
        vectorizer.vocabulary_ = feature["vocabulary"]
        vectorizer.idf_ = _load_array(directory, f"{feature['name']}-idf")
        transformers.append((feature["name"], vectorizer))
    classifier = LogisticRegression(**spec["classifier"]["params"])
    classifier.coef_ = _load_array(directory, "coef")
    classifier.intercept_ = _load_array(directory, "intercept")
    classifier.classes_ = np.array(spec["classifier"]["classes"])
    classifier.n_features_in_ = spec["classifier"]["n_features_in"]
    union = FeatureUnion(transformers, transformer_weights=spec["union_weights"])
    return Pipeline([("features", union), ("classifier", classifier)])


def _plain_params(params: dict[str, Any]) -> dict[str, Any]:
    """Parameters as JSON; a callable (a custom tokenizer) cannot be saved as data, so it is refused."""
    import numpy as np

    plain = {}
    for key, value in params.items():
        if key == "dtype":
            value = np.dtype(value).name
        elif isinstance(value, tuple):
            value = list(value)
        elif callable(value):
            raise ValueError(f"cannot save parameter {key}={value!r} as data: use only built-in analyzers")
        plain[key] = value
    json.dumps(plain)  # fails here, naming the value, rather than after half the files are written
    return plain


def _save_array(directory: Path, name: str, array: Any) -> None:
    import numpy as np

    np.save(directory / ARRAY_FILE.format(name), np.asarray(array), allow_pickle=False)


def _load_array(directory: Path, name: str) -> Any:
    import numpy as np

    return np.load(directory / ARRAY_FILE.format(name), allow_pickle=False)
