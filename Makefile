# Two commands for a fresh machine: `make demo` and `make test`. Both create .venv when missing.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
RUN_STAMP := $(VENV)/.installed-run
DEV_STAMP := $(VENV)/.installed-dev
SPARK_STAMP := $(VENV)/.installed-spark
OTEL_STAMP := $(VENV)/.installed-otel
SAMPLES := sample_sessions

# The floors job: the tests (not lint) in their own venv, with every dependency at the oldest
# version pyproject.toml allows (constraints/floors.txt).
FLOORS_VENV  := .venv-floors
FLOORS_BIN   := $(FLOORS_VENV)/bin
FLOORS_STAMP := $(FLOORS_VENV)/.installed-floors

# The tiers (docs/development.md, "Tiers"): `make test` runs the fast one, the tests marked with
# none of SLOW_TIERS; `make test-slow` those marked; `make test-all` both. Two pytest-xdist
# workers; the tests over the recordings' batch share one (--dist loadgroup).
SLOW_TIERS := process matrix fuzz browser
space := $(subst ,, )
SLOW := $(subst $(space), or ,$(SLOW_TIERS))
PYTEST = $(BIN)/python -m pytest -q -n 2 --dist loadgroup

.PHONY: demo test test-slow test-all test-spark test-otel test-floors fuzz lint bench samples record record-resume record-live clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(RUN_STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e .
	@touch $@

# What `make test` needs: the project and its dev tools (not the spark extra: see test-spark).
$(DEV_STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[dev]'
	@touch $@ $(RUN_STAMP)

# The spark extra (pyspark, about 800 MB), only for `make test-spark`.
$(SPARK_STAMP): $(DEV_STAMP)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[dev,spark]'
	@touch $@

demo: $(RUN_STAMP)
	$(BIN)/copilot-logs sessions $(SAMPLES)
	$(BIN)/copilot-logs count $(SAMPLES)

# The fast tier, then the static checks. Without pyspark the Spark engine's tests skip, saying
# so in one line (make test-spark runs them).
test: $(DEV_STAMP)
	$(PYTEST) -m "not ($(SLOW))"
	$(MAKE) --no-print-directory lint

# The other tiers: processes, the matrix of recordings read one by one, hypothesis through
# every format, Chromium. CI runs them after `make test`.
test-slow: $(DEV_STAMP)
	$(PYTEST) -m "$(SLOW)"

test-all: test test-slow

# The Spark engine's comparison tests (tests/test_spark.py), with the spark extra installed;
# they skip without Java 17+. CI runs them after `make test` (.ci/run).
test-spark: $(SPARK_STAMP)
	$(BIN)/python -m pytest -q tests/test_spark.py

# The otel-test extra (rotel, a real OTLP collector), only for `make test-otel`. A platform
# with no rotel wheel (or no network) says so in one line; the tests then skip, saying so.
$(OTEL_STAMP): $(DEV_STAMP)
	@if $(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[dev,otel,otel-test]'; \
	then touch $@; \
	else echo "test-otel: the otel-test extra (rotel) cannot be installed here: pip install 'copilot-logs[otel-test]'"; fi

# `otel --endpoint` through a real collector (tests/test_otel_collector.py), then the rest of
# otel's tests; CI runs it after `make test-spark` (.ci/run).
test-otel: $(OTEL_STAMP)
	$(BIN)/python -m pytest -q -rs tests/test_otel_collector.py tests/test_otel.py

$(FLOORS_BIN)/python:
	$(PYTHON) -m venv $(FLOORS_VENV)

$(FLOORS_STAMP): pyproject.toml constraints/floors.txt | $(FLOORS_BIN)/python
	$(FLOORS_BIN)/python -m pip install --quiet --disable-pip-version-check \
		-c constraints/floors.txt -e '.[dev]'
	@touch $@

# The fast tier only: the floors change no logic that the other tiers test.
test-floors: $(FLOORS_STAMP)
	$(FLOORS_BIN)/python -m pytest -q -n 2 --dist loadgroup -m "not ($(SLOW))"

# The hostile-input fuzz tests with many examples (profile `fuzz` in tests/conftest.py).
fuzz: $(DEV_STAMP)
	HYPOTHESIS_PROFILE=fuzz $(BIN)/python -m pytest tests/test_fuzz.py tests/test_fuzz_surroundings.py $(FUZZ_ARGS)

lint: $(DEV_STAMP)
	$(BIN)/ruff check copilot_logs synth rig tests benchmarks
	$(BIN)/ruff format --check copilot_logs synth rig tests benchmarks
	$(BIN)/mypy copilot_logs synth rig

bench: $(DEV_STAMP)
	$(BIN)/python -m benchmarks.run $(BENCH_ARGS)

# Rewrites sample_sessions/ with the test-data generator synth/ (the files are committed).
samples: $(RUN_STAMP)
	$(BIN)/python -m tests.make_samples $(SAMPLES)

# Records the scenarios with real Copilot CLI versions into tests/recordings/ (docs/recordings.md):
# each version is fetched once from the npm registry into ~/.cache/copilot-logs-rig/.
# make record VERSIONS="1.0.102 1.0.85" [SCENARIOS="one-tool subagent"]
VERSIONS ?= newest
record: $(RUN_STAMP)
	$(BIN)/python -m rig.record --versions $(VERSIONS) $(if $(SCENARIOS),--scenarios $(SCENARIOS)) --out tests/recordings

# Resumes damaged recordings with real CLI versions and keeps what each did (docs/doctor.md), then
# regenerates the evidence doctor judges by and docs/doctor.md's table from it:
# make record-resume VERSIONS="1.0.102 1.0.85 1.0.60 1.0.40 1.0.20" [DAMAGES="glued-line u2028"]
record-resume: $(DEV_STAMP)
	$(BIN)/python -m rig.resume --versions $(VERSIONS) $(if $(DAMAGES),--damages $(DAMAGES)) --out tests/recordings
	$(BIN)/python -m rig.resume --evidence --out tests/recordings
	$(BIN)/python -m copilot_logs.render.doctor docs/doctor.md

# CI's live step: every scenario recorded with the newest CLI on the npm registry into a scratch
# folder, then the tests that need the real CLI, on those fresh logs. Skipped, in one line, when
# the CLI cannot be fetched (rig.record exits 75).
LIVE_DIR ?= $(or $(TMPDIR),/tmp)/copilot-logs-live
record-live: $(DEV_STAMP)
	rm -rf $(LIVE_DIR)
	@status=0; $(BIN)/python -m rig.record --versions newest --out $(LIVE_DIR) || status=$$?; \
	if [ $$status = 75 ]; then echo "record-live: skipped: the Copilot CLI cannot be fetched"; exit 0; fi; \
	[ $$status = 0 ] || exit $$status; \
	COPILOT_LOGS_RECORDINGS=$(LIVE_DIR) COPILOT_RIG_VERSION=$$(ls $(LIVE_DIR)) \
		$(BIN)/python -m pytest -q -m live tests

clean:
	rm -rf $(VENV) $(FLOORS_VENV) .pytest_cache .mypy_cache .ruff_cache
