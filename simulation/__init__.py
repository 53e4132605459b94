"""A GitHub stand-in and the replay of the learning loop: for tests and benchmarks, not in the image."""
