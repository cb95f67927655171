# RL.LEASE + RL.RELEASE against the Lua semaphore on its own (issue 22):
# bench/lease_pair.py runs bench.py's lease rounds (interleaved,
# commandstats usec) with no replica and then with a replica attached, and
# prints the ratios. `make bench` runs it too: added here as a prerequisite,
# so the top-level recipe stays as it is (it runs before bench.py).

.PHONY: bench-lease

bench: bench-lease

bench-lease: build
	@scripts/deps.sh python
	$(PY) bench/lease_pair.py
