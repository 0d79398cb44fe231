# Two commands for a newcomer (as root on Debian/Ubuntu):  make dev  and  make test
SHELL := /bin/bash
PY := .venv/bin/python
CLUSTER := deploy/devcluster/cluster.sh
export PORT ?= 8000
# The dev cluster's Slurm generation (deploy/devcluster/cluster.sh, the portal's settings):
# `make cluster-up SLURM_RELEASE=26.05`, `make dev SLURM_RELEASE=26.05`.
export SLURM_RELEASE ?= 24.11
# `make test` runs the slurm-marked tests once per release listed here.
export SLURM_RELEASES ?= 24.11,26.05

.PHONY: dev test test-fast test-pure test-flaky system-deps venv dev-env services cluster-up cluster-down cluster-status migrate seed serve lint bench

dev: system-deps venv services cluster-up dev-env migrate seed serve

test: system-deps venv
	scripts/services.sh --postgres
	for release in $$(tr , ' ' <<<"$(SLURM_RELEASES)"); do SLURM_RELEASE=$$release $(CLUSTER) up || exit 1; done
	scripts/test.sh

# Tests that need only the database: no dev cluster, no browser (seconds to start, ~9 min on 2 cores).
test-fast: system-deps venv
	scripts/services.sh --postgres
	SLURM_RELEASES=24.11 scripts/test.sh -m "not slurm and not browser"

# Tests that need no root, no database, no Redis, no cluster, no browser (conftest.py marks
# them `pure`): seconds, on any machine with Python. Exit 5 (none selected) is a failure.
test-pure: venv
	.venv/bin/python -m pytest -q -m pure -p no:cacheprovider; rc=$$?; [ $$rc -ne 5 ] || rc=1; exit $$rc

# Repeat the tests that meet real daemons (or ARGS='-k mirror') N times on each release and
# list every test that ever failed: `make test-flaky N=5`.
N ?= 5
test-flaky: system-deps venv
	scripts/services.sh --postgres
	for release in $$(tr , ' ' <<<"$(SLURM_RELEASES)"); do SLURM_RELEASE=$$release $(CLUSTER) up || exit 1; done
	scripts/test-flaky.sh $(N) $(ARGS)

system-deps:
	scripts/install-system-deps.sh

venv: .venv/.installed

.venv/.installed: requirements.txt requirements-dev.txt
	python3 -m venv .venv
	.venv/bin/pip install -q --upgrade pip
	.venv/bin/pip install -q -r requirements-dev.txt
	touch $@

services:
	scripts/services.sh

# `make dev` serves every generation listed here in one portal (scripts/dev.sh): SLURM_RELEASE's
# as the portal's own cluster, the others as further clusters (docs/clusters.md).
export DEV_RELEASES ?= $(SLURM_RELEASES)
cluster-up:
	$(CLUSTER) up
	for release in $$(tr , ' ' <<<"$(DEV_RELEASES)"); do [[ $$release == "$(SLURM_RELEASE)" ]] || SLURM_RELEASE=$$release $(CLUSTER) up || exit 1; done

cluster-down:
	$(CLUSTER) down

cluster-status:
	$(CLUSTER) status

dev-env:
	scripts/dev-env.sh

migrate: venv dev-env
	$(PY) manage.py migrate --noinput
	# Static files with gzip and brotli copies, served compressed (gpupool/settings.py, STORAGES).
	$(PY) manage.py collectstatic --noinput -v0

seed: venv dev-env
	$(PY) manage.py seed_demo

serve: venv
	scripts/dev.sh

lint: venv
	.venv/bin/ruff check .
