"""The benchmarks: each module runs from the repository root as `.venv/bin/python -m bench.NAME`, and they share
code by importing each other (those that start the service: bench.service). Results and commands:
docs/BENCHMARKS.md."""
