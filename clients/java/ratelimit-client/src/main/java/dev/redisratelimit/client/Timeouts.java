package dev.redisratelimit.client;

import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Executor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

/**
 * A stage's deadline without {@link CompletableFuture#orTimeout}: that one
 * cancels its timer task when the stage completes first, and the cancel
 * takes the JDK timer queue's lock on the completing thread — an event loop
 * (Lettuce's, Reactor Netty's) that then parks whenever another thread holds
 * the lock (BlockHound saw it). Here the timer task is scheduled on the same
 * JDK delay scheduler (scheduling is a queue offer, which Reactor's BlockHound
 * integration allows) and never cancelled: when the stage is already done it
 * does nothing.
 */
final class Timeouts {

    private Timeouts() {
    }

    /** {@code f}, failed with a {@link TimeoutException} unless it completes within {@code ms}. */
    static <T> CompletableFuture<T> within(CompletableFuture<T> f, long ms) {
        if (!f.isDone()) {
            Executor later = CompletableFuture.delayedExecutor(ms, TimeUnit.MILLISECONDS, Runnable::run);
            later.execute(() -> f.completeExceptionally(new TimeoutException()));
        }
        return f;
    }
}
