# Two commands on a fresh machine with only python3:  `make demo`  and  `make test`.
# `make docs` builds the documentation site (mkdocs, --strict) into site/.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-dev
DOCS_STAMP := $(VENV)/.installed-docs
# The MongoDB-wire test server (SecantusDB) lives outside the checkout so that several
# checkouts share one; tools/with-mongo.sh starts it when nothing answers and stops only
# what it started. Set FLOWSCHED_MONGO_URI to use a real MongoDB instead.
export MONGO_HOME ?= /tmp/flowsched-mongo
export MONGO_PORT ?= 27017
# The PostgreSQL test server (tools/start-postgres.sh: initdb into PG_HOME, pg_ctl on a free
# port of 127.0.0.1); tools/with-postgres.sh starts it unless FLOWSCHED_POSTGRES_URL is set
# and stops only what it started. Set FLOWSCHED_POSTGRES_URL to use an existing server.
export PG_HOME ?= /tmp/flowsched-pg

.PHONY: demo test lint docs bench pg-peers soak seam-soak mutations venv mongo-start mongo-stop postgres-start postgres-stop clean browser console-screenshots console-bench

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --disable-pip-version-check --upgrade pip

$(VENV)/.installed: pyproject.toml | $(VENV)/bin/python
	$(PY) -m pip install -q --disable-pip-version-check -e .
	touch $@

$(STAMP): pyproject.toml | $(VENV)/bin/python
	$(PY) -m pip install -q --disable-pip-version-check -e '.[dev]'
	-@$(MAKE) --no-print-directory browser
	touch $@ $(VENV)/.installed

# The console's browser tests drive Debian's chromium (`playwright install` cannot download
# here). Tolerant: without it (not root, no apt) those tests skip and say why.
browser:
	@test -x /usr/bin/chromium || { command -v apt-get >/dev/null && \
	  (apt-get update -qq && apt-get install -y -qq chromium) >/dev/null 2>&1; } || \
	  echo "no chromium: the console's browser tests will skip"

$(DOCS_STAMP): pyproject.toml | $(VENV)/bin/python
	$(PY) -m pip install -q --disable-pip-version-check -e '.[docs]'
	touch $@ $(VENV)/.installed

venv: $(STAMP)

demo: $(VENV)/.installed
	$(PY) examples/quickstart.py

# Two workers (pytest-xdist): the suite waits on the server and on node processes about as
# much as it computes. `make test XDIST=` runs it in one process.
XDIST ?= -n 2 --dist loadgroup
test: $(STAMP)
	bash tools/with-mongo.sh bash tools/with-postgres.sh $(PY) -m pytest $(XDIST) $(PYTEST_ARGS)

lint: $(STAMP)
	$(VENV)/bin/ruff check flowsched tests examples bench
	$(VENV)/bin/ruff format --check flowsched bench
	$(VENV)/bin/mypy --strict flowsched
	MYPYPATH=bench $(VENV)/bin/mypy --strict bench

docs: $(DOCS_STAMP)
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

# The flow bench's peer, the `transitions` state machine, in a virtualenv of its own.
PEER_VENV := bench/.venv-transitions
$(PEER_VENV)/.installed:
	$(PYTHON) -m venv $(PEER_VENV)
	$(PEER_VENV)/bin/python -m pip install -q --disable-pip-version-check 'transitions==0.9.3'
	touch $@

# The async bench's peer, APScheduler 4 (async core), in a virtualenv of its own.
APS4_VENV := bench/.venv-apscheduler4
$(APS4_VENV)/.installed:
	$(PYTHON) -m venv $(APS4_VENV)
	$(APS4_VENV)/bin/python -m pip install -q --disable-pip-version-check 'apscheduler==4.0.0a6'
	touch $@

# Its MongoDB data store's driver (bench/apscheduler4_mongo_peer.py).
$(APS4_VENV)/.installed-pymongo: $(APS4_VENV)/.installed
	$(APS4_VENV)/bin/python -m pip install -q --disable-pip-version-check 'pymongo>=4.13'
	touch $@

# bench/postgres_peers.py's peer, APScheduler 3's SQLAlchemyJobStore, needs SQLAlchemy: a
# bench-only requirement, installed into the dev venv (not a dependency of flowsched).
$(VENV)/.installed-sqlalchemy: $(STAMP)
	$(PY) -m pip install -q --disable-pip-version-check 'SQLAlchemy>=2'
	touch $@

# bench/postgres_peers.py's other peers, each in a virtualenv of its own (exact pins; the
# run skips, with a note, a peer whose virtualenv is missing).
PGQ_VENV  := bench/.venv-pgqueuer
PCR_VENV  := bench/.venv-procrastinate
DBOS_VENV := bench/.venv-dbos
$(PGQ_VENV)/.installed:
	$(PYTHON) -m venv $(PGQ_VENV)
	$(PGQ_VENV)/bin/python -m pip install -q --disable-pip-version-check 'pgqueuer==1.6.0' \
		'asyncpg==0.32.0'
	touch $@

$(PCR_VENV)/.installed:
	$(PYTHON) -m venv $(PCR_VENV)
	$(PCR_VENV)/bin/python -m pip install -q --disable-pip-version-check \
		'procrastinate==3.10.0' 'psycopg[binary,pool]==3.3.9'
	touch $@

$(DBOS_VENV)/.installed:
	$(PYTHON) -m venv $(DBOS_VENV)
	$(DBOS_VENV)/bin/python -m pip install -q --disable-pip-version-check 'dbos==3.4.0'
	touch $@

# APScheduler 4's SQLAlchemyDataStore on PostgreSQL (bench/postgres_peer_apscheduler4.py).
$(APS4_VENV)/.installed-postgres: $(APS4_VENV)/.installed
	$(APS4_VENV)/bin/python -m pip install -q --disable-pip-version-check \
		'sqlalchemy[asyncio]==2.0.44' 'asyncpg==0.32.0' 'sniffio==1.3.1'
	touch $@

PG_PEER_VENVS := $(PGQ_VENV)/.installed $(PCR_VENV)/.installed $(DBOS_VENV)/.installed \
		$(APS4_VENV)/.installed-postgres
pg-peers: $(PG_PEER_VENVS)

bench: $(STAMP) $(PEER_VENV)/.installed $(APS4_VENV)/.installed $(APS4_VENV)/.installed-pymongo \
		$(VENV)/.installed-sqlalchemy $(PG_PEER_VENVS)
	$(PY) bench/import_bench.py
	$(PY) bench/config_bench.py
	$(PY) bench/memory_bench.py
	$(PY) bench/flow_bench.py
	$(PY) bench/async_bench.py
	$(PY) bench/integrations_bench.py
	bash tools/with-mongo.sh $(PY) bench/mongo_bench.py
	bash tools/with-mongo.sh $(PY) bench/async_mongo_bench.py
	bash tools/with-mongo.sh $(PY) bench/mongo_write_costs.py
	bash tools/with-postgres.sh $(PY) bench/postgres_bench.py
	bash tools/with-postgres.sh $(PY) bench/postgres_peers.py
	bash tools/with-postgres.sh $(PY) bench/postgres_nodes.py
	bash tools/with-postgres.sh $(PY) bench/postgres_flat_costs.py
	bash tools/with-postgres.sh $(PY) bench/postgres_wakeup.py

# The console guide's screenshots: made by the browser tests, kept under docs/.
console-screenshots: $(STAMP)
	$(PY) -m pytest tests/console/test_console_browser.py -q
	mkdir -p docs/assets/console
	cp tests/console/screenshots/*.png docs/assets/console/

console-bench: $(STAMP)
	bash tools/with-mongo.sh $(PY) bench/console_bench.py
	bash tools/with-mongo.sh $(PY) bench/console_bulk_bench.py
# The cluster simulator over many seeds (docs/explanation/simulation.md), every fault kind.
SOAK_SEEDS  ?= 10000
SOAK_FAULTS ?= all
SOAK_JOBS   ?= 2
soak: $(STAMP)
	$(VENV)/bin/flowsched simulate --seeds $(SOAK_SEEDS) --faults $(SOAK_FAULTS) --jobs $(SOAK_JOBS)
	$(VENV)/bin/flowsched simulate --node-core --seeds $(SOAK_SEEDS)

# Bursts of replaces and cancels on 3 real nodes per store (bench/seam_burst.py): counts, and
# exit 1 if a form started on a check sent after its successor returned.
seam-soak: $(STAMP)
	bash tools/with-mongo.sh bash tools/with-postgres.sh $(PY) bench/seam_burst.py

# Planted bugs the simulator must catch within 1,000 seeds each.
mutations: $(STAMP)
	FLOWSCHED_MUTATIONS=1 $(PY) -m pytest tests/simulate/test_simulate_mutations.py tests/simulate/test_node_simulate_mutations.py -q -s

mongo-start:
	bash tools/start-mongo.sh

mongo-stop:
	bash tools/start-mongo.sh stop

postgres-start:
	bash tools/start-postgres.sh

postgres-stop:
	bash tools/start-postgres.sh stop

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache site
