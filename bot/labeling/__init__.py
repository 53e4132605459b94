"""Labelling one issue: gather its inputs, decide (pure), act on GitHub; the config file, comments, the served model."""
