# The Java client (clients/java: ratelimit-client, -lettuce, -spring-data and
# their integration tests) and the Spring Boot starter with its examples.
# `make java-test` runs `mvn verify` there twice: on Spring Boot 4.0 (the
# default build) and on Spring Boot 3.5 (-Dboot3: the same starter tests and
# examples on Boot 3.5.7, and the Spring Data transport's tests on Spring Data
# Redis 3.5; see clients/java/README.md, "Spring Boot 3.5 or 4.0"). The tests
# start their own redis-server processes (standalone, Cluster, Sentinel) with
# the module $(MODULE). Maven fetches the pinned dependencies itself.

JAVA_DIR := $(CURDIR)/clients/java
JAVA_MVN := mvn -q -B -Dstyle.color=never -f $(JAVA_DIR)/pom.xml

.PHONY: java-deps java-test java-boot4-test java-boot3-test

EXTRA_TESTS += java-test

# Java 17 and Maven on a fresh Debian machine, only when missing.
java-deps:
	@scripts/deps.sh system
	@command -v java >/dev/null && command -v mvn >/dev/null || \
	  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openjdk-17-jdk-headless maven; }

# Maven is quiet (-q); each summary line comes from Surefire's reports of
# that build (every module of its reactor). The Boot 3.5 build writes to
# target/boot3 in the Spring modules and ratelimit-it, so neither build's
# `clean` erases what the other left; it rebuilds the client jars itself.
java-test: java-deps build
	$(java_boot4)
	$(java_boot3)

java-boot4-test: java-deps build
	$(java_boot4)

java-boot3-test: java-deps build
	$(java_boot3)

define java_boot4
RL_MODULE=$(MODULE) $(JAVA_MVN) clean verify
@$(call java_summary,-path '*/target/surefire-reports/TEST-*.xml',java)
endef

define java_boot3
RL_MODULE=$(MODULE) $(JAVA_MVN) -Dboot3 clean verify
@$(call java_summary,-path '*/target/boot3/surefire-reports/TEST-*.xml' -o -path '*/ratelimit-client/target/surefire-reports/TEST-*.xml',java-boot3)
endef

# $(1): find's test for the build's reports, $(2): the summary's label
java_summary = find $(JAVA_DIR) $(CURDIR)/examples \( $(1) \) -exec cat {} + | \
	  sed -n 's/^<testsuite [^>]*tests="\([0-9]*\)"[^>]*errors="\([0-9]*\)"[^>]*skipped="\([0-9]*\)"[^>]*failures="\([0-9]*\)".*/\1 \2 \3 \4/p' | \
	  awk '{t+=$$1; e+=$$2; s+=$$3; f+=$$4} END {printf "$(2): %d passed, %d failed, %d skipped\n", t-e-s-f, e+f, s}'
