# All set-up is here: `make demo` and `make test` each install what they need on a fresh machine.
PY       ?= python3
VENV     := .venv
BIN      := $(VENV)/bin
LS_VENV  := .venv-ls
LS_VERSION := 1.23.2
DEMO_DIR ?= demo-project
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export PIP_DISABLE_PIP_VERSION_CHECK := 1

.PHONY: setup demo test test-fast perf docs clean chromium fonts texlive peers

setup: $(VENV)/.ready $(LS_VENV)/.ready chromium fonts texlive

# torch first (CPU wheel), pinned by constraints.txt so nothing pulls the CUDA build; then the package;
# then the torchvision compat hook if PyPI's torchvision cannot load its C++ ops with CPU torch.
$(VENV)/.ready: pyproject.toml constraints.txt scripts/torchvision_compat.py
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip wheel
	$(BIN)/pip install -q -c constraints.txt torch==2.13.0
	$(BIN)/pip install -q -c constraints.txt -e '.[test]'
	$(BIN)/python scripts/torchvision_compat.py
	$(BIN)/python scripts/check_env.py
	touch $@

# Label Studio pins Django and openai<2: it lives in its own virtualenv, used as an executable only.
$(LS_VENV)/.ready:
	test -x $(LS_VENV)/bin/python || $(PY) -m venv $(LS_VENV)
	$(LS_VENV)/bin/pip install -q label-studio==$(LS_VERSION)
	touch $@

# Headless Chromium for the Label Studio screenshot test (Debian package; skipped when not root).
chromium:
	@command -v chromium >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && (apt-get update -qq && apt-get install -y -qq chromium >/dev/null) || echo "chromium not installed: the screenshot test will be skipped"; }

# Fonts for report figures in CJK, Thai and Devanagari (Debian packages; matplotlib falls back to them glyph by
# glyph, see cultura.evaluate.reportkit.FONT_FALLBACK). Skipped with a note when not root.
FONT_PKGS := fonts-noto-core fonts-noto-cjk fonts-thai-tlwg
fonts:
	@fc-list 2>/dev/null | grep -q "Noto Sans CJK" && fc-list | grep -qi "tlwg\|Noto Sans Thai" || { [ "$$(id -u)" = 0 ] && (apt-get update -qq && apt-get install -y -qq $(FONT_PKGS) >/dev/null && rm -rf $$HOME/.cache/matplotlib) || echo "fonts not installed ($(FONT_PKGS)): CJK/Thai/Devanagari labels in report figures may show boxes"; }

# The performance scripts' peers, each in its own clean virtualenv (as their users install them; conflicting numpy
# pins, and sqlite-utils scans every installed distribution for plugins at start-up):
#   python perf/bench_dedup_quality.py --imagededup-python .venv-imagededup/bin/python \
#       --fastdup-python .venv-fastdup/bin/python
#   python perf/bench_download.py --peers-python .venv-img2dataset/bin/python
#   python perf/bench_startup.py --peers-python .venv-sqlite-utils/bin/python
peers:
	test -x .venv-sqlite-utils/bin/python || $(PY) -m venv .venv-sqlite-utils
	.venv-sqlite-utils/bin/pip install -q sqlite-utils
	test -x .venv-fastdup/bin/python || $(PY) -m venv .venv-fastdup
	.venv-fastdup/bin/pip install -q fastdup
	test -x .venv-imagededup/bin/python || $(PY) -m venv .venv-imagededup
	.venv-imagededup/bin/pip install -q imagededup
	test -x .venv-img2dataset/bin/python || $(PY) -m venv .venv-img2dataset
	.venv-img2dataset/bin/pip install -q img2dataset

# TeX Live for the report's LaTeX tables (booktabs, array, graphicx: the base and recommended sets, no fonts
# beyond Computer Modern); the table test compiles them with pdflatex. Skipped with a note when not root.
TEX_PKGS := texlive-latex-base texlive-latex-recommended
texlive:
	@command -v pdflatex >/dev/null 2>&1 && kpsewhich booktabs.sty >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && (apt-get update -qq && apt-get install -y -qq --no-install-recommends $(TEX_PKGS) >/dev/null) || echo "TeX Live not installed ($(TEX_PKGS)): the pdflatex test of the report's tables will be skipped"; }

demo: setup
	rm -rf $(DEMO_DIR)
	$(BIN)/python -m cultura.cli.demo $(DEMO_DIR)

# Both tiers, each on its own (the unit tier's check that none of its tests loads a model library holds only
# where nothing else loaded one first), one worker per CPU; the integration tier at most four (each worker starts
# its own Label Studio), and the tests that start a local Ray on one worker.
test: setup
	$(BIN)/python -m pytest -q -p no:randomly -n auto tests/unit
	LABEL_STUDIO_BIN=$(CURDIR)/$(LS_VENV)/bin/label-studio $(BIN)/python -m pytest -q -p no:randomly -n auto \
		--maxprocesses 4 --dist loadgroup tests/integration

# The inner loop: the unit tier (no server, subprocess virtualenv, Label Studio or Ray), one worker per CPU.
test-fast: $(VENV)/.ready
	$(BIN)/python -m pytest -q -x -p no:randomly -n auto tests/unit

perf: $(VENV)/.ready
	for b in perf/bench_*.py; do $(BIN)/python $$b || exit 1; done

clean:
	rm -rf $(DEMO_DIR) .pytest_cache
