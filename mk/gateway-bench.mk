# make bench-gateway: Spring Cloud Gateway's RedisRateLimiter against
# redis-ratelimit's RateLimiter in the same RequestRateLimiter filter, the
# RateLimit filter and no limiter, on alike routes of the example gateway
# (examples/spring-gateway, GatewayBench: tag "bench", so make test never
# runs it). Interleaved rounds; Redis server time, gateway CPU and p50 per
# request, printed as ratios (also in examples/spring-gateway/target/bench-gateway.txt).
# BENCH_ROUNDS, BENCH_REQUESTS, BENCH_CONCURRENCY tune it.
.PHONY: bench-gateway

bench-gateway: java-deps build
	RL_MODULE=$(RL_MODULE) mvn -q -B -ntp -f clients/java/pom.xml -am -pl :ratelimit-example-spring-gateway \
		-Dgateway.bench.excluded= -Dgroups=bench -Dtest=GatewayBench -Dsurefire.failIfNoSpecifiedTests=false verify
	@cat examples/spring-gateway/target/bench-gateway.txt
