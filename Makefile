# Local infrastructure and entry points. Every target sources infra/env.sh (overridable defaults).
SHELL := /bin/bash
.SHELLFLAGS := -e -o pipefail -c

.PHONY: infra demo test stop clean

## infra: install what is missing, start MariaDB (127.0.0.1:3307) and SeaweedFS S3 (127.0.0.1:8333)
infra:
	. infra/env.sh && bash infra/up.sh

## demo: infra + load the inventory sample database + run the demo
demo: infra
	. infra/env.sh && bash infra/load_dataset.sh inventory && python3 -m assets.demo

## test: infra + the test suite
test: infra
	. infra/env.sh && python3 -m pytest -q tests

## stop: stop every local service (data is kept)
stop:
	. infra/env.sh && bash infra/down.sh

## clean: stop + remove all local state (.infra: databases, object store; .lake)
clean: stop
	. infra/env.sh && rm -rf .infra .lake
