package dev.redisratelimit.example;

import static org.assertj.core.api.Assertions.assertThat;

import dev.redisratelimit.spring.test.RedisServer;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/** The app's own settings at start, as `make example-java` runs it (a process of its own). */
class ExampleAppSettingsTest {

    /** Runs the app's main() as `make example-java` does, with env; its exit code, stdout and stderr. */
    private static String[] run(Map<String, String> env) throws Exception {
        String java = ProcessHandle.current().info().command().orElse("java");
        ProcessBuilder pb = new ProcessBuilder(java, "-cp", System.getProperty("java.class.path"), ExampleApp.class.getName());
        pb.environment().putAll(env);
        Process p = pb.start();
        // read both pipes while it runs (a full pipe would block it)
        var out = CompletableFuture.supplyAsync(() -> read(p.getInputStream()));
        var err = CompletableFuture.supplyAsync(() -> read(p.getErrorStream()));
        if (!p.waitFor(120, TimeUnit.SECONDS)) {
            p.destroyForcibly();
            throw new AssertionError("the app did not exit within 120 s");
        }
        return new String[] {Integer.toString(p.exitValue()), out.get(), err.get()};
    }

    private static String read(InputStream in) {
        try {
            return new String(in.readAllBytes(), StandardCharsets.UTF_8);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    @Test
    void anUnknownBackendIsOneLineAndExit1() throws Exception {
        String[] r = run(Map.of("RL_BACKEND", "bogus", "REDIS_URL", "redis://127.0.0.1:1"));
        assertThat(r[0]).isEqualTo("1");
        assertThat((r[1] + r[2]).strip()).isEqualTo("example-java: RL_BACKEND: invalid backend 'bogus': 'module', 'functions' or 'auto'");
    }

    @Test
    void aRedisWithoutTheModuleIsOneLineAndExit1() throws Exception {
        try (RedisServer bare = RedisServer.launchWithoutModule()) {
            String[] r = run(Map.of("RL_BACKEND", "module", "REDIS_URL", bare.url(), "PORT", "0"));
            assertThat(r[0]).isEqualTo("1");
            // SERVICES.md: "exits non-zero with one line saying so" -- no Spring failure report, no stack trace
            assertThat(r[2].strip()).doesNotContain("\n").startsWith("example-java: ").contains("module is not loaded");
            assertThat(r[1] + r[2]).doesNotContain("APPLICATION FAILED TO START").doesNotContain("\tat ");
        }
    }
}
