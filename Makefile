# aiteam: two commands matter — `make demo` and `make test`.
PY          := .venv/bin/python
STAMP       := .venv/.installed-$(shell cksum pyproject.toml | cut -d' ' -f1)
# Integration tests talk to these; override to point elsewhere.
TEST_DATABASE_URL ?= postgres://postgres@127.0.0.1:5432/aiteam
TEST_BROKER_URL   ?= redis://127.0.0.1:6379/15
# With DATABASE_URL set, settings refuse the embedded default's public key: the tests bring one of their own (the
# unit tests too: some start processes with DATABASE_URL set).
TEST_SECRET_KEY   ?= aiteam-tests-only-not-a-secret
# Unit tests run in this many processes (pytest-xdist; each has its own in-memory SQLite or test_aiteam_gwN
# database; --dist loadgroup keeps the tests of one xdist_group on one worker); the integration tests run in
# one, beside the Celery workers they start. Twice the 2 cores: a test often waits on a process it started (the
# sandbox, git, pip, PostgreSQL), and 2 workers left the machine part idle (make test-unit alone: 620 s with 2,
# 441 s with 4, the machine 99 % busy).
TEST_WORKERS      ?= 4
EMBEDDED    := env -u DATABASE_URL -u CELERY_BROKER_URL -u ANTHROPIC_API_KEY

.PHONY: venv demo ticket-demo test test-unit test-integration test-unit-pg serve lint bench bench-deps screenshots

$(STAMP): pyproject.toml
	test -x $(PY) || python3 -m venv .venv
	$(PY) -m pip install -q --disable-pip-version-check --upgrade pip
	$(PY) -m pip install -q --disable-pip-version-check -e '.[dev]'
	rm -f .venv/.installed-* && touch $@

venv: $(STAMP)

## demo: the sample brief through the whole team to `deployed` on the embedded default (SQLite, eager Celery,
## replay of the bundled cassette, stories approved in autonomous mode, the deployment, which adds a CI workflow,
## approved by you at the terminal: --approve-deployment); the branch lands in var/remotes/
demo: venv
	$(EMBEDDED) $(PY) manage.py migrate -v0
	$(EMBEDDED) $(PY) manage.py aiteam_demo --approve-deployment

## ticket-demo: a ticket on an existing repository (docs/adr/0035) on the embedded default, ending at a draft pull
## request on a local fake GitHub: the sample repository (var/sample-ticket-repo, textkit: slugify leaves double
## dashes) is built with its history and served by tests/fakes/host.py (git over https, the pulls API, ports the OS
## picks, stopped when the run ends) as demo/textkit; the ticket runs on the bundled cassette, offline (no package
## index: the sample has no dependencies), pushes its branch with the demo's token (allow-listed for this run only)
## and opens the pull request; the pull request, the diff, its scope and the tests before and after are printed
## (you approve the deployment at the terminal)
SAMPLE_TICKET := agents/cassettes/sample_ticket
ticket-demo: venv
	$(EMBEDDED) $(PY) manage.py migrate -v0
	$(EMBEDDED) $(PY) $(SAMPLE_TICKET)/make_repo.py var/sample-ticket-repo
	$(EMBEDDED) AITEAM_PIP_INDEX_URL= $(PY) -m tests.fakes.host --repo var/sample-ticket-repo --as demo/textkit \
	  --root var/fake-github -- $(PY) manage.py aiteam_ticket --repo {git_url} --host github --api-url {api_url} \
	  --token-env {token_env} --base main --title "$$(cat $(SAMPLE_TICKET)/title.txt)" \
	  --body-file $(SAMPLE_TICKET)/body.md --cassette $(SAMPLE_TICKET)/cassette.json --approve-deployment

## test: unit and browser tests (SQLite, eager), integration tests (PostgreSQL, Redis, real workers), and the unit
## tests on PostgreSQL (every query the ORM builds, bound and prepared by the server as in production). The
## integration tests mostly wait on the workers they start, so they run beside the other two (which run one after
## the other): their output goes to var/test-integration.log and is printed when they end; either half failing
## fails the whole
test: venv
	@mkdir -p var; \
	$(MAKE) --no-print-directory test-integration > var/test-integration.log 2>&1 & integration=$$!; \
	$(MAKE) --no-print-directory test-unit test-unit-pg; unit=$$?; \
	wait $$integration; status=$$?; \
	echo "--- integration tests (var/test-integration.log):"; cat var/test-integration.log; \
	test $$unit -eq 0 -a $$status -eq 0

test-unit: venv
	$(EMBEDDED) DJANGO_SECRET_KEY=$(TEST_SECRET_KEY) $(PY) -m pytest tests/unit tests/browser -q -n $(TEST_WORKERS) --dist loadgroup

test-integration: venv
	DATABASE_URL=$(TEST_DATABASE_URL) CELERY_BROKER_URL=$(TEST_BROKER_URL) DJANGO_SECRET_KEY=$(TEST_SECRET_KEY) \
	  $(PY) -m pytest tests/integration -q

test-unit-pg: venv
	@if DATABASE_URL=$(TEST_DATABASE_URL) CELERY_BROKER_URL=$(TEST_BROKER_URL) $(PY) -m tests.services; then \
	  $(EMBEDDED) DATABASE_URL=$(TEST_DATABASE_URL) DJANGO_SECRET_KEY=$(TEST_SECRET_KEY) \
	    $(PY) -m pytest tests/unit -q -n $(TEST_WORKERS) --dist loadgroup --database-tests-only; \
	elif [ "$$CI" = true ]; then exit 1; else echo "unit tests on PostgreSQL skipped"; fi

## serve: collectstatic, migrate, then web, the llm (threads) and sandbox (prefork) workers and beat from Procfile,
## against DATABASE_URL and CELERY_BROKER_URL when set; else web and beat only, on the embedded default (SQLite
## under var/, steps run eagerly inside the web process); static files are collected (hashed, compressed) into DJANGO_STATIC_ROOT,
## var/static unless set, and served by WhiteNoise
# honcho gives .env to the processes it starts: a broker named there means workers too
DOTENV_BROKER = $(shell grep -s '^CELERY_BROKER_URL=.' .env)
serve: export DJANGO_STATIC_ROOT ?= $(CURDIR)/var/static
serve: venv
	$(PY) manage.py collectstatic --noinput -v0
	$(PY) manage.py migrate
	$(PY) -m honcho start -f Procfile $(if $(CELERY_BROKER_URL)$(DOTENV_BROKER),,web beat)

## bench: figures, not tests (scratch aiteam_bench_* databases, Redis db 12)
BENCH_BROKER_URL ?= redis://127.0.0.1:6379/12
bench: bench-deps
	BENCH_BROKER_URL=$(BENCH_BROKER_URL) $(PY) bench/step_overhead.py
	BENCH_BROKER_URL=$(BENCH_BROKER_URL) $(PY) bench/pipeline_ratio.py
	BENCH_BROKER_URL=$(BENCH_BROKER_URL) $(PY) bench/api_load.py
	BENCH_BROKER_URL=$(BENCH_BROKER_URL) $(PY) bench/worker_memory.py

bench-deps: venv
	$(PY) -m pip install -q --disable-pip-version-check -e '.[dev,bench]'

lint: venv
	$(PY) -m ruff check .

## screenshots: docs/*.png for the README, from a scratch embedded install served by gunicorn (needs Chromium)
screenshots: venv
	$(PY) docs/screenshots.py

## bench-review-inbox: one SLA sweep and one inbox page over 100,000 review tasks (1 % overdue) in PostgreSQL;
## creates and drops its own database (BENCH_REVIEW_DATABASE_URL)
BENCH_REVIEW_DATABASE_URL ?= postgres://postgres@127.0.0.1:5432/aiteam_bench
.PHONY: bench-review-inbox
bench-review-inbox: venv
	DATABASE_URL=$(BENCH_REVIEW_DATABASE_URL) $(PY) bench/review_inbox.py
