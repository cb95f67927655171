# The Django example app (examples/django: one file, the redis_rl Django
# adapter under uvicorn), in the Python client's venv (Django is pinned in
# clients/python/requirements-test.txt). Its tests are examples/python's:
# the same SERVICES.md checks, run against this app (EXAMPLE_APP), so one
# contract judges both Python apps; twice, as examples/python's: with the
# module, then with RL_BACKEND=functions on servers without it.

.PHONY: example-django django-test

EXTRA_TESTS += django-test

django-test: build python-venv
	cd $(CURDIR)/examples/python && EXAMPLE_APP=../django/app.py RL_SERVER=redis7 $(PYC_PY) -m pytest -q -p no:cacheprovider tests
	cd $(CURDIR)/examples/python && RL_BACKEND=functions EXAMPLE_APP=../django/app.py RL_SERVER=redis7 $(PYC_PY) -m pytest -q -p no:cacheprovider tests

# The example app in the foreground: PORT (8080), REDIS_URL or REDIS_CLUSTER, RL_PREFIX, RL_BACKEND.
example-django: python-venv
	cd $(CURDIR)/examples/django && $(PYC_PY) app.py
