# The docs (README.md, docs/). py-it already runs their transcripts, links and
# Python recipes (integration/test_docs.py, test_docs_recipes.py) on every
# server; `make docs-node-test` runs the recipe that shows the Node package's
# call (docs/recipes/llm_gateway_node.js), which needs the package built.

.PHONY: docs-node-test

EXTRA_TESTS += docs-node-test

docs-node-test: build node-build
	RL_DOCS_NODE=1 RL_SERVER=redis7 $(PY) -m pytest -q -p no:cacheprovider integration/test_docs_node.py
