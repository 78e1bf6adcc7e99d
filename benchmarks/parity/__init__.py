"""Labels and outputs compared with DeLFT's and Keras's own, run with their venvs (not unit tests: they need those)."""
