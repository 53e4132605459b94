"""Pictures both applications draw: the confusion matrix (the trainer's evaluation, the review page).

matplotlib's object API only (no pyplot): no global backend or figure state shared between callers.
"""

from __future__ import annotations

from collections.abc import Sequence


def confusion_figure(matrix: Sequence[Sequence[int]], labels: Sequence[str], *, xlabel: str = "predicted",
                     ylabel: str = "actual"):
    """A heat map coloured by the share of each row, annotated with the counts; rows and columns in `labels` order."""
    from matplotlib.figure import Figure

    shares = [[count / max(1, sum(row)) for count in row] for row in matrix]
    figure = Figure(figsize=(1.2 + 0.9 * len(labels), 1.0 + 0.8 * len(labels)), layout="constrained")
    axes = figure.add_subplot()
    axes.imshow(shares, cmap="Blues", vmin=0.0, vmax=1.0)
    axes.set_xticks(range(len(labels)), labels, rotation=30, ha="right")
    axes.set_yticks(range(len(labels)), labels)
    axes.set_xlabel(xlabel)
    axes.set_ylabel(ylabel)
    for i, row in enumerate(matrix):
        for j, count in enumerate(row):
            axes.text(j, i, str(count), ha="center", va="center", color="white" if shares[i][j] > 0.5 else "black")
    return figure
