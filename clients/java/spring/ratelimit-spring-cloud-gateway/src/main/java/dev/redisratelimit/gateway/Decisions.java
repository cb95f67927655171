package dev.redisratelimit.gateway;

import dev.redisratelimit.client.Permit;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.Supplier;
import reactor.core.publisher.Mono;

/** A decision as a Mono that never leaks what it decides. */
final class Decisions {

    private Decisions() {
    }

    /**
     * The permit {@code acquire} decides. Cancelled while deciding (the client
     * went away): the permit Redis may still grant has nobody to close it, so
     * it is closed when it comes (leases released, estimates refunded). The
     * Mono waits on a copy, so its cancel does not cancel the decision this
     * relies on; once the permit is emitted, closing it is its taker's.
     */
    static Mono<Permit> permit(Supplier<CompletionStage<Permit>> acquire) {
        return Mono.defer(() -> {
            CompletableFuture<Permit> decision = acquire.get().toCompletableFuture();
            AtomicBoolean taken = new AtomicBoolean();
            return Mono.fromCompletionStage(decision.thenApply(p -> p))
                    .doOnNext(p -> taken.set(true))
                    .doOnCancel(() -> {
                        if (!taken.get()) {
                            decision.thenAccept(p -> p.closeAsync(Map.of()));
                        }
                    });
        });
    }
}
