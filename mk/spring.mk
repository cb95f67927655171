# The Spring Boot starter (clients/java/spring) and the seed services' example
# app (examples/spring). They are modules of the Java build (clients/java/pom.xml
# lists spring/, whose pom lists the example), so java.mk's `mvn verify` builds
# and tests them with the client; spring-test runs the same build on its own,
# and is added to `make test` only when java.mk is absent. The tests start their
# own redis-server processes (standalone, a three-primary Cluster) with $(RL_MODULE).
SPRING_MVN := mvn -B -ntp -f clients/java/pom.xml
SPRING_MODULES := spring/ratelimit-spring-boot-autoconfigure,spring/ratelimit-spring-boot-starter,:ratelimit-example-spring

.PHONY: spring-deps spring-test example-java example-kotlin example-webflux

# Java 17 and Maven on a fresh Debian machine (Maven fetches the pinned
# dependencies from Maven Central itself).
spring-deps:
	@scripts/deps.sh system
	@command -v java >/dev/null && command -v mvn >/dev/null || \
	  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openjdk-17-jdk-headless maven; }

spring-test: spring-deps build
	RL_MODULE=$(RL_MODULE) $(SPRING_MVN) verify -am -pl $(SPRING_MODULES)

# The example app in the foreground: PORT, REDIS_URL or REDIS_CLUSTER, RL_PREFIX
# (shared/SERVICES.md); the Redis it names must have the module loaded.
example-java: spring-deps
	$(SPRING_MVN) -q -DskipTests package -am -pl :ratelimit-example-spring
	exec java -jar examples/spring/target/ratelimit-example-spring.jar

# The Kotlin example (endpoints 3, 5 and 6 of SERVICES.md, and its own seeds'
# endpoints), with the same environment (RL_BACKEND too).
example-kotlin: spring-deps
	$(SPRING_MVN) -q -DskipTests package -am -pl :ratelimit-example-spring-kotlin
	exec java -jar examples/spring-kotlin/target/ratelimit-example-spring-kotlin.jar

# The WebFlux example (endpoints 3, 5 and 6 on Reactor Netty), the same environment.
example-webflux: spring-deps
	$(SPRING_MVN) -q -DskipTests package -am -pl :ratelimit-example-spring-webflux
	exec java -jar examples/spring-webflux/target/ratelimit-example-spring-webflux.jar

ifeq ($(filter java-test,$(EXTRA_TESTS)),)
EXTRA_TESTS += spring-test
endif
