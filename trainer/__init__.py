"""Training: datasets, fine-tuning, evaluation, the model registry, the promotion gate and retraining."""
