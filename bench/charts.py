"""The benchmarks' line charts share one look: a 0–1 score axis, a light grid, the legend bottom right."""

from __future__ import annotations

from pathlib import Path


def finish(figure, axes, path: Path, *, title: str, xlabel: str, ylabel: str) -> Path:
    """Title and axes labels, the common look, then the PNG at `path`."""
    axes.set_title(title)
    axes.set_xlabel(xlabel)
    axes.set_ylabel(ylabel)
    axes.set_ylim(0, 1)
    axes.grid(alpha=0.3)
    axes.legend(loc="lower right")
    figure.tight_layout()
    figure.savefig(path)
    return path
