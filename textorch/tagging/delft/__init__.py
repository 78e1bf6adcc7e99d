"""DeLFT compatibility: models trained by DeLFT, and the interfaces GROBID calls."""
