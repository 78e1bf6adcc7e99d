"""Sequence labelling: the SequenceLabeler, its configuration, runs, n-fold and incremental training, DeLFT/GROBID presets and its answer format."""
