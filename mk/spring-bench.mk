# make bench-java: the Spring starter's @RateLimited against seed 000's own
# aspect + Lua script and against no limiter, on one Spring MVC endpoint with
# 2 ms of work (bench/spring, a module of the spring pom's "bench" profile, so
# make test never builds it). Interleaved rounds, ratios printed.
# BENCH_ROUNDS, BENCH_SECONDS, BENCH_CONCURRENCY, BENCH_USERS tune it.
.PHONY: bench-java

bench-java: spring-deps build
	mvn -q -B -ntp -f clients/java/pom.xml -Pbench -DskipTests package -am -pl :ratelimit-spring-bench
	RL_MODULE=$(RL_MODULE) java -Xmx512m -jar bench/spring/target/ratelimit-spring-bench.jar
