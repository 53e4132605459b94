"""The same-answers gate reads the App's answers with the memory in the loop: an engine that keeps the model's
top labels but moves the embeddings the kNN vote reads is refused."""

import numpy as np

from core.memory import Memory
from trainer.dataset import Example
from trainer.fast_path import Answers, memory_answers, same_answers

LABELS = ["bug", "feature"]


def issues(n: int = 40) -> list[Example]:
    """Two repositories, labels alternating."""
    return [Example(f"issue {i}", "", LABELS[i % 2], repo=f"octo/{i % 4 < 2}") for i in range(n)]


def test_each_issue_is_adjusted_by_the_memory_of_the_other_issues_of_its_repository_as_the_app_does():
    rng = np.random.default_rng(0)
    examples = issues()
    vectors = rng.normal(size=(len(examples), 8)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    scores = [{"bug": p, "feature": 1 - p} for p in rng.uniform(0.3, 0.7, len(examples))]
    answers = memory_answers(scores, vectors.tolist(), examples)
    for i, example in enumerate(examples):
        others = [j for j, other in enumerate(examples) if other.repo == example.repo and j != i]
        memory = Memory(vectors[others], [examples[j].label for j in others],
                        model_labels=[max(scores[j], key=scores[j].get) for j in others])
        adjusted = memory.adjust(scores[i], vectors[i])
        assert answers[i] == max(adjusted, key=adjusted.get)


def test_a_memory_that_knows_each_issue_moves_near_ties_to_its_label():
    """Embeddings that place each issue beside its own kind: the vote decides the near-ties the model lost."""
    examples = issues()
    vectors = [[1.0, 0.01 * i] if example.label == "bug" else [0.01 * i, 1.0] for i, example in enumerate(examples)]
    near_tie_wrong = [{"bug": 0.45, "feature": 0.55} if e.label == "bug" else {"bug": 0.55, "feature": 0.45}
                      for e in examples]
    assert memory_answers(near_tie_wrong, vectors, examples) == [e.label for e in examples]


def test_an_engine_with_the_models_answers_but_other_answers_with_the_memory_is_refused():
    examples = issues()
    truth = [e.label for e in examples]
    reference = Answers(model=truth, with_memory=truth)
    moved = Answers(model=truth, with_memory=["bug"] * len(truth))  # the vote read different embeddings
    gate = same_answers(reference, moved, examples, LABELS)
    assert gate["top_label_agreement"] == 1.0 and gate["memory_agreement"] == 0.5
    assert gate["passed"] is False
    assert same_answers(reference, reference, examples, LABELS)["passed"] is True
