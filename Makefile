# The two commands a newcomer needs (see README):
#   make demo   set up, build a model bundle, index the sample corpus, run example queries
#   make test   set up and run the test suite (what CI runs through .ci/run)
# and for whoever changes a command's --help:
#   make docs   regenerate the --help blocks in the docs with cog (tests/project/test_docs.py checks them)
# and for whoever changes the Pi path (docs/pi.md, dependencies, the hailo backend), as root:
#   make pi-check   docs/pi.md's install on a Debian Trixie arm64 root under qemu (scripts/pi_check.py)

PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
# torch is only for export and tests. Pin the CPU build: an unpinned torch pulls a CUDA build of
# several GB. Override on other platforms, e.g. TORCH_SPEC="torch==2.9.1" on aarch64.
TORCH_SPEC ?= torch==2.13.0
STAMP  := $(VENV)/.installed
# files with cog blocks (generated --help); tests/project/test_docs.py runs cog --check on the same list
COG_FILES := docs/cli-reference.md

.PHONY: demo test setup bench docs clean pi-check

$(STAMP): pyproject.toml Makefile
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet "$(TORCH_SPEC)"
	$(PY) -m pip install --quiet -e ".[compile,test,plot]"
	touch $(STAMP)

setup: $(STAMP)

demo: $(STAMP)
	$(PY) scripts/demo.py

test: $(STAMP)
	$(PY) -m pytest

bench: $(STAMP)
	$(PY) bench/encode.py

docs: $(STAMP)
	$(PY) -m cogapp -r $(COG_FILES)

pi-check: $(STAMP)
	$(PY) scripts/pi_check.py

clean:
	rm -rf $(VENV) demo-work
