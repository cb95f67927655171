# The Spring Boot starter (clients/java/spring) and the seed services' example
# app (examples/spring): one Maven reactor build, whose tests start their own
# redis-server processes (standalone, a three-primary Cluster) with $(RL_MODULE).
SPRING_MVN := mvn -q -B -f clients/java/spring/pom.xml

.PHONY: spring-deps spring-test example-java

# Java 17 and Maven on a fresh Debian machine (Maven fetches the pinned
# dependencies from Maven Central itself).
spring-deps:
	@command -v java >/dev/null && command -v mvn >/dev/null || \
	  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openjdk-17-jdk-headless maven; }

spring-test: spring-deps build
	RL_MODULE=$(RL_MODULE) mvn -B -ntp -f clients/java/spring/pom.xml verify

# The example app in the foreground: PORT, REDIS_URL or REDIS_CLUSTER, RL_PREFIX
# (shared/SERVICES.md); the Redis it names must have the module loaded.
example-java: spring-deps
	$(SPRING_MVN) -DskipTests package
	exec java -jar examples/spring/target/ratelimit-example-spring.jar

EXTRA_TESTS += spring-test
