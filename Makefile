# Local infrastructure and entry points. Every target sources infra/env.sh (overridable defaults) and
# runs Python from the locked project environment (.venv, made by `uv sync --frozen` from uv.lock).
SHELL := /bin/bash
.SHELLFLAGS := -e -o pipefail -c
# `uv run --frozen --no-sync`: .venv on PATH (dagster, dg, pytest), nothing re-resolved or re-installed
RUN := . infra/env.sh && "$$CDC_UV" run --frozen --no-sync

.PHONY: infra demo test lint format ui stop clean

## infra: install what is missing (apt, uv + .venv from uv.lock), start MariaDB (127.0.0.1:3307) and SeaweedFS S3 (127.0.0.1:8333)
infra:
	. infra/env.sh && bash infra/up.sh

## demo: infra + load the inventory sample database + run the demo (Dagster's event log goes to .infra/demo.log)
demo: infra
	$(RUN) bash infra/load_dataset.sh inventory && $(RUN) python -m assets.demo

## test: infra + lint/type checks + the test suite
test: infra lint
	$(RUN) python -m pytest -q tests

## lint: ruff (lint + format check) and mypy on the package, as configured in pyproject.toml
lint:
	$(RUN) ruff check .
	$(RUN) ruff format --check .
	$(RUN) mypy

## format: apply ruff's fixes and formatting
format:
	$(RUN) ruff check --fix .
	$(RUN) ruff format .

## ui: infra + inventory + `dagster dev` on definitions.py with the CDC sensor on (http://127.0.0.1:3000; CDC_UI_PORT, CDC_UI_HOST)
ui: infra
	$(RUN) bash infra/load_dataset.sh inventory && $(RUN) bash infra/ui.sh

## stop: stop every local service (data is kept)
stop:
	. infra/env.sh && bash infra/down.sh

## clean: stop + remove all local state (.infra: databases, object store, tools; .lake; .venv)
clean: stop
	. infra/env.sh && rm -rf .infra .lake .venv
