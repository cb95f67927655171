package dev.redisratelimit.spring.autoconfigure;

import dev.redisratelimit.client.ModuleNotLoadedException;
import org.springframework.boot.diagnostics.AbstractFailureAnalyzer;
import org.springframework.boot.diagnostics.FailureAnalysis;

/** Says in one sentence, instead of a stack trace, that the Redis has no ratelimit module. */
class ModuleMissingFailureAnalyzer extends AbstractFailureAnalyzer<ModuleNotLoadedException> {
    @Override
    protected FailureAnalysis analyze(Throwable root, ModuleNotLoadedException cause) {
        return new FailureAnalysis(cause.getMessage(),
                "Load the module: redis-server --loadmodule /path/to/libredis_ratelimit.so (or MODULE LOAD), "
                        + "or point spring.data.redis.* at a server that has it.", cause);
    }
}
