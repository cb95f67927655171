# The Java client (clients/java: ratelimit-client, -lettuce, -spring-data and
# their integration tests). `make java-test` runs `mvn verify` there; the tests
# start their own redis-server processes (standalone, a three-primary Cluster)
# with the module $(MODULE). Maven fetches the pinned dependencies itself.

JAVA_DIR := $(CURDIR)/clients/java
JAVA_MVN := mvn -q -B -Dstyle.color=never -f $(JAVA_DIR)/pom.xml

.PHONY: java-deps java-test

EXTRA_TESTS += java-test

# Java 17 and Maven on a fresh Debian machine, only when missing.
java-deps:
	@scripts/deps.sh system
	@command -v java >/dev/null && command -v mvn >/dev/null || \
	  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openjdk-17-jdk-headless maven; }

# Maven is quiet (-q); the summary line comes from Surefire's reports (every
# module of the reactor, the starter's and its example's too once they join it).
java-test: java-deps build
	RL_MODULE=$(MODULE) $(JAVA_MVN) clean verify
	@find $(JAVA_DIR) $(CURDIR)/examples -path '*/target/surefire-reports/TEST-*.xml' -exec cat {} + | \
	  sed -n 's/^<testsuite [^>]*tests="\([0-9]*\)"[^>]*errors="\([0-9]*\)"[^>]*skipped="\([0-9]*\)"[^>]*failures="\([0-9]*\)".*/\1 \2 \3 \4/p' | \
	  awk '{t+=$$1; e+=$$2; s+=$$3; f+=$$4} END {printf "java: %d passed, %d failed, %d skipped\n", t-e-s-f, e+f, s}'
