"""Maintainers' decisions: label events become verdicts, training data and memory; slash commands; live quality."""
