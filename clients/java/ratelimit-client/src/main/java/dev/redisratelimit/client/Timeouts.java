package dev.redisratelimit.client;

import java.util.Queue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.ConcurrentMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * A stage's deadline without {@link CompletableFuture#orTimeout}: that one
 * cancels its timer task when the stage completes first, and the cancel
 * takes the JDK timer queue's lock on the completing thread — an event loop
 * (Lettuce's, Reactor Netty's) that then parks whenever another thread holds
 * the lock (BlockHound saw it).
 *
 * <p>Nor one timer task per stage: at thousands of decisions a second, the
 * timer thread woke once per decision (to find it long done) — a thread
 * wake-up per request, more CPU than the rest of the deadline (bench/spring).
 * Instead the stages wait in a lane per budget: a lock-free FIFO queue (one
 * budget, so deadlines come in the order the stages are added) that one
 * sweep, on the JDK's delay scheduler, empties up to now and then schedules
 * itself for the next deadline, at most every {@link #TICK_NANOS}. Adding a
 * stage is a queue offer (what Reactor's BlockHound integration allows on an
 * event loop); a stage that completes first is skipped by the sweep, never
 * cancelled. A deadline may pass up to one tick late.
 */
final class Timeouts {

    /** The most a sweep is late, and so the fewest ms between two sweeps of a lane. */
    static final long TICK_NANOS = TimeUnit.MILLISECONDS.toNanos(2);

    private static final ConcurrentMap<Long, Lane> LANES = new ConcurrentHashMap<>();

    private Timeouts() {
    }

    /** {@code f}, failed with a {@link TimeoutException} unless it completes within {@code ms}. */
    static <T> CompletableFuture<T> within(CompletableFuture<T> f, long ms) {
        if (!f.isDone()) {
            Lane lane = LANES.get(ms);
            if (lane == null) {
                lane = LANES.computeIfAbsent(ms, k -> new Lane());
            }
            lane.add(f, System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(ms));
        }
        return f;
    }

    private record Pending(CompletableFuture<?> stage, long deadline) {}

    /** The stages of one budget, in deadline order, and whether a sweep is scheduled. */
    private static final class Lane {
        private final Queue<Pending> pending = new ConcurrentLinkedQueue<>();
        private final AtomicBoolean armed = new AtomicBoolean();

        void add(CompletableFuture<?> stage, long deadline) {
            pending.offer(new Pending(stage, deadline));
            arm(deadline - System.nanoTime());
        }

        // Schedules a sweep unless one is (it will reach this stage: its deadline is not before theirs).
        private void arm(long inNanos) {
            if (!armed.get() && armed.compareAndSet(false, true)) {
                CompletableFuture.delayedExecutor(Math.max(0, inNanos), TimeUnit.NANOSECONDS, Runnable::run).execute(this::sweep);
            }
        }

        private void sweep() {
            long now = System.nanoTime();
            try {
                Pending p;
                while ((p = pending.peek()) != null && p.deadline() - now <= 0) {
                    pending.poll();
                    if (!p.stage().isDone()) {
                        p.stage().completeExceptionally(new TimeoutException());
                    }
                }
            } finally {
                // Whatever happened, the lane is swept again. Stages added meanwhile saw it armed:
                // schedule for the oldest, at most a tick from now.
                armed.set(false);
                Pending next = pending.peek();
                if (next != null) {
                    arm(Math.max(next.deadline() - now, TICK_NANOS));
                }
            }
        }
    }
}
