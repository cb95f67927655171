// The same four limits as llm_gateway.py, as a policy of the Node package
// (clients/node). tag "llm": every key under {llm} (one slot, also under
// Cluster), the global limit shared by every API key (llm:{llm}:global).
const { Policy, RateLimitedError } = require("redis-ratelimit");

const llm = new Policy("llm", { tag: "llm" })
  .tokenBucket("rate", 60, 60_000, 10) // 60 a minute, bursts of 10
  .quota("tokens", null, "day", 100_000, { cost: "estimate" }) // zone per call; settled to permit.used(n)
  .concurrency("inflight", 2, 60_000) // 2 in flight
  .slidingWindow("global", 1000, 60_000, { global: true }); // every key together

// limiter = new RateLimiter(new Redis()); model(maxTokens) resolves to the tokens used, or throws.
async function complete(limiter, apiKey, zone, maxTokens, model) {
  try {
    return await limiter.withPermit(llm, apiKey, { estimate: maxTokens, zone }, async (permit) => {
      const used = await model(maxTokens); // throws: the permit settles to 0 and releases
      permit.used(used);
      return { status: 200, used };
    });
  } catch (e) {
    if (!(e instanceof RateLimitedError)) throw e;
    return { status: 429, retryAfterMs: e.decision.retryAfter }; // 1000 when "inflight" binds; null: waiting cannot help
  }
}

module.exports = { llm, complete };
