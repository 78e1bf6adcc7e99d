"""Text classification: the TextClassifier, its configuration and runs."""
