package dev.redisratelimit.client;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import org.junit.jupiter.api.Test;

/** The decision budget's deadline: a stage not done in time fails with a TimeoutException; one done first keeps its value. */
class TimeoutsTest {

    @Test
    void aStageNotDoneInTimeFailsWithATimeout() {
        long t0 = System.nanoTime();
        CompletableFuture<String> f = Timeouts.within(new CompletableFuture<>(), 100);
        assertThat(f).failsWithin(5, TimeUnit.SECONDS).withThrowableOfType(ExecutionException.class)
                .withCauseInstanceOf(TimeoutException.class);
        assertThat(TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0)).isGreaterThanOrEqualTo(100);
    }

    @Test
    void aStageDoneFirstKeepsItsValueAfterTheDeadline() throws Exception {
        CompletableFuture<String> pending = new CompletableFuture<>();
        CompletableFuture<String> f = Timeouts.within(pending, 1000); // long enough for the next line on a loaded machine
        pending.complete("reply");
        Thread.sleep(1300); // the deadline passed: its task ran and changed nothing
        assertThat(f.get()).isEqualTo("reply");
        assertThat(Timeouts.within(CompletableFuture.completedFuture("done"), 1).get()).isEqualTo("done");
    }

    @Test
    void manyStagesOfOneBudgetEachTimeOutOrKeepTheirValueAndTheLaneRearmsWhenIdle() throws Exception {
        // One lane (budget 150 ms) swept once per tick, not one timer task per stage.
        List<CompletableFuture<String>> pending = new ArrayList<>();
        List<CompletableFuture<String>> guarded = new ArrayList<>();
        long t0 = System.nanoTime();
        for (int i = 0; i < 2000; i++) {
            CompletableFuture<String> p = new CompletableFuture<>();
            pending.add(p);
            guarded.add(Timeouts.within(p, 150));
        }
        for (int i = 0; i < pending.size(); i += 2) {
            pending.get(i).complete("reply " + i); // every other one answered in time
        }
        CompletableFuture.allOf(guarded.stream().map(f -> f.exceptionally(e -> null)).toArray(CompletableFuture[]::new))
                .get(10, TimeUnit.SECONDS);
        assertThat(TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0)).isGreaterThanOrEqualTo(150);
        for (int i = 0; i < guarded.size(); i++) {
            if (i % 2 == 0) {
                assertThat(guarded.get(i).get()).isEqualTo("reply " + i);
            } else {
                assertThat(guarded.get(i)).isCompletedExceptionally();
                assertThatThrownBy(guarded.get(i)::get).hasCauseInstanceOf(TimeoutException.class);
            }
        }
        // The lane went idle (nothing pending): a stage added now still gets its deadline.
        Thread.sleep(50);
        long t1 = System.nanoTime();
        CompletableFuture<String> late = Timeouts.within(new CompletableFuture<>(), 150);
        assertThat(late).failsWithin(5, TimeUnit.SECONDS).withThrowableOfType(ExecutionException.class)
                .withCauseInstanceOf(TimeoutException.class);
        assertThat(TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t1)).isGreaterThanOrEqualTo(150);
    }
}
