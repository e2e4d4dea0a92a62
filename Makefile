# The two commands a newcomer needs: `make run` and `make test`.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
PLUGINS := $(wildcard plugins/*/pyproject.toml) $(wildcard presets/*/pyproject.toml)
STAMP := $(VENV)/.installed

.PHONY: install run test test-fast bench bench-scale services-start services-stop clean wp-plugin

$(STAMP): pyproject.toml $(PLUGINS)
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test]' $(foreach p,$(PLUGINS),-e $(dir $(p)))
	touch $(STAMP)

install: $(STAMP)

run: install
	$(BIN)/kbf services start
	$(BIN)/kbf db upgrade
	$(BIN)/kbf demo
	$(BIN)/kbf run

test: install
	bash scripts/test-deps.sh
	$(BIN)/python -m pytest -q tests

test-fast: install
	$(BIN)/python -m pytest -q tests -m "not browser and not wordpress"

# every benchmark; the scale bench at 100k chunks (about 10 minutes on 2 cores)
bench: install
	$(BIN)/python -m bench.run

# the WordPress companion plugin as an installable zip: dist/kbframework-connect-<version>.zip
wp-plugin:
	$(PY) scripts/build-wp-plugin.py

# the scale bench alone at SIZE chunks (100000, 300000, 1000000), results in bench/results/scale-SIZE.json
SIZE ?= 100000
bench-scale: install
	KB_BENCH_SCALE_SIZE=$(SIZE) KB_BENCH_RESULTS=scale-$(SIZE).json $(BIN)/python -m bench.run scale_bench

services-start: install
	$(BIN)/kbf services start

services-stop:
	$(BIN)/kbf services stop

clean:
	rm -rf $(VENV) var
