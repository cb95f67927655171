package dev.redisratelimit.example;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.charset.StandardCharsets;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/** The app's own settings at start, as `make example-java` runs it (a process of its own). */
class ExampleAppSettingsTest {

    @Test
    void anUnknownBackendIsOneLineAndExit1() throws Exception {
        String java = ProcessHandle.current().info().command().orElse("java");
        ProcessBuilder pb = new ProcessBuilder(java, "-cp", System.getProperty("java.class.path"), ExampleApp.class.getName());
        pb.environment().put("RL_BACKEND", "bogus");
        pb.environment().put("REDIS_URL", "redis://127.0.0.1:1");
        pb.redirectErrorStream(true);
        Process p = pb.start();
        assertThat(p.waitFor(60, TimeUnit.SECONDS)).isTrue();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertThat(p.exitValue()).isEqualTo(1);
        assertThat(out.strip()).isEqualTo("example-java: RL_BACKEND: invalid backend 'bogus': 'module', 'functions' or 'auto'");
    }
}
