# Two entry points, each sets up (or refreshes) .venv first:
#   make demo   - the project's main job
#   make test   - the test suite
PY := .venv/bin/python

.PHONY: setup demo test
setup:
	@bash tools/setup_env.sh

demo: setup
	$(PY) demo/main_job.py

test: setup
	$(PY) -m pytest -q -n 2 --dist loadfile tests
