"""What matching a config's `areas` against a repository's labels costs per issue: the compiled areas
(core.own_labels.candidates.compile_areas: a set lookup per prefix length) against each label tried against
each entry, the rule before them, carried here as the reference.

    .venv/bin/python -m bench.areas [--labels 5000] [--areas 7000 50]
"""

from __future__ import annotations

import argparse
import time

from core.own_labels.candidates import PREFIX_ENDS, compile_areas


def each_against_each(label: str, areas: tuple[str, ...]) -> bool:
    """The former rule: every entry tried against the label, a prefix by startswith."""
    return any(label == area or (area[-1:] in PREFIX_ENDS and label.startswith(area.rstrip("*"))) for area in areas)


def seconds(match, labels: list[str]) -> tuple[float, int]:
    started = time.perf_counter()
    taken = sum(1 for label in labels if match(label))
    return time.perf_counter() - started, taken


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--labels", type=int, default=5000, help="the repository's labels")
    parser.add_argument("--areas", type=int, nargs="+", default=[7000, 50], help="entries of `areas`")
    args = parser.parse_args()
    labels = [f"area/component-{n:05d}" for n in range(args.labels)]
    for n_areas in args.areas:  # half names, half prefixes, none of them taking a label: the worst case
        areas = tuple(f"topic-{n:05d}" for n in range(n_areas // 2)) + tuple(
            f"module-{n:05d}:" for n in range(n_areas - n_areas // 2))
        compiled = compile_areas(areas)
        fast, taken_fast = seconds(compiled.takes, labels)
        slow, taken_slow = seconds(lambda label: each_against_each(label, areas), labels)
        assert taken_fast == taken_slow
        print(f"{n_areas} areas × {args.labels} labels: compiled {fast * 1000:.1f} ms, each against each "
              f"{slow * 1000:.1f} ms ({slow / fast:.0f}x)")


if __name__ == "__main__":
    main()
