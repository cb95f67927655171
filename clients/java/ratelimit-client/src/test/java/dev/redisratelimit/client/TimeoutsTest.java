package dev.redisratelimit.client;

import static org.assertj.core.api.Assertions.assertThat;

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
}
