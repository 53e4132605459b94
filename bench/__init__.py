"""The benchmarks: each module runs from the repository root as `.venv/bin/python -m bench.NAME`, and they
share code by importing each other (`from bench.quality import ...`). Results and commands: docs/BENCHMARKS.md."""
