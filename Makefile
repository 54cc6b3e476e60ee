# The two commands a newcomer needs: `make run` and `make test`. Both set themselves up.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: run test lint format bench venv clean

venv: $(VENV)/.installed

# pip installs uv (its pin in requirements.txt), uv the rest: seconds, where pip took a minute.
# Compiled to bytecode as pip does: where PYTHONDONTWRITEBYTECODE is set (this CI machine),
# nothing else would, and every process would compile every module it imports again.
$(VENV)/.installed: requirements.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet "$$(grep '^uv==' requirements.txt)"
	$(BIN)/python -m uv pip install --quiet --compile-bytecode --python $(BIN)/python \
	  -r requirements.txt
	touch $@

# Embedded mode: SQLite, in-process Celery worker and beat, in-memory channel layer.
run: venv
	$(BIN)/python manage.py runplatform

# The whole suite, on SQLite and then on PostgreSQL + Redis (started here if installed).
test: venv
	scripts/test.sh

lint: venv
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: venv
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

bench: venv
	scripts/bench.sh $(or $(BENCH),dispatch) $(ARGS)

clean:
	rm -rf $(VENV) db.sqlite3* .services
