package dev.redisratelimit.spring.autoconfigure;

import dev.redisratelimit.client.LibraryNotLoadedException;
import dev.redisratelimit.client.ModuleNotLoadedException;

import org.springframework.boot.diagnostics.AbstractFailureAnalyzer;
import org.springframework.boot.diagnostics.FailureAnalysis;

/** Says in one sentence, instead of a stack trace, that the Redis has no ratelimit module. */
class ModuleMissingFailureAnalyzer extends AbstractFailureAnalyzer<ModuleNotLoadedException> {
    @Override
    protected FailureAnalysis analyze(Throwable root, ModuleNotLoadedException cause) {
        if (cause instanceof LibraryNotLoadedException) {
            return new FailureAnalysis(cause.getMessage(),
                    "Load the Functions library once as an administrator (the command above), or grant this Redis user "
                            + "+function|load.", cause);
        }
        return new FailureAnalysis(cause.getMessage(),
                "Load the module: redis-server --loadmodule /path/to/libredis_ratelimit.so (or MODULE LOAD), "
                        + "point spring.data.redis.* at a server that has it, or set ratelimit.backend=functions "
                        + "(the Functions library: no module needed).", cause);
    }
}
