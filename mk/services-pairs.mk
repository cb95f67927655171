# Any two example apps are one service (SERVICES.md, last section): the
# cross-app services tests (examples/services-test) start instance 1 of one
# app and instance 2 of another (Python+Node, Node+Java, Java+Python) on one
# redis-server with $(RL_MODULE) and one RL_PREFIX, and run the SERVICES.md
# checks across them. Each app is started as its `make example-*` starts it:
# the Python venv, the built Node package, the Spring example's jar (built
# here by example-java's Maven command). Every pair must pass: the Spring
# starter writes the shared key format since issues 33/34.
# test_next_round.py runs SERVICES.md's next-round checks (endpoint 6, a late
# reply, part of a Cluster down, CLUSTERDOWN, RL_BACKEND=functions|auto) on
# each app by the same code: Python, Node, Spring (MVC) and Spring Kotlin
# (NEXT_ROUND_APPS picks some); the Spring WebFlux example runs its standalone
# test only (endpoint 6, a late reply: ~30-55 s; all three:
# NEXT_ROUND_APPS=webflux, about 2 minutes).

.PHONY: services-pairs-test

EXTRA_TESTS += services-pairs-test

services-pairs-test: build python-venv node-build spring-deps
	$(SPRING_MVN) -q -DskipTests package -am -pl :ratelimit-example-spring,:ratelimit-example-spring-kotlin,:ratelimit-example-spring-webflux
	cd examples/services-test && RL_SERVER=redis7 RL_MODULE=$(RL_MODULE) NEXT_ROUND_APPS=java,kotlin $(PYC_PY) -m pytest -q -p no:cacheprovider .
	cd examples/services-test && RL_SERVER=redis7 RL_MODULE=$(RL_MODULE) NEXT_ROUND_APPS=webflux $(PYC_PY) -m pytest -q -p no:cacheprovider test_next_round.py -k standalone
