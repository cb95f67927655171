package dev.redisratelimit.it.support;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

/** One {@code redis-server} this test run started (and the only kind it stops). */
public final class RedisProcess {

    private final int port;
    private final Process process;
    private final Path dir;
    private final List<String> cmd;

    private RedisProcess(int port, Process process, Path dir, List<String> cmd) {
        this.port = port;
        this.process = process;
        this.dir = dir;
        this.cmd = cmd;
    }

    public int port() {
        return port;
    }

    static RedisProcess start(int port, Path module, List<String> extra) throws IOException, InterruptedException {
        Path dir = Files.createTempDirectory("rl-java-redis-" + port + "-");
        List<String> cmd = new ArrayList<>(List.of("redis-server", "--port", Integer.toString(port), "--bind", "127.0.0.1",
                "--save", "", "--appendonly", "no", "--dir", dir.toString(), "--daemonize", "no"));
        if (module != null) {
            cmd.addAll(List.of("--loadmodule", module.toString()));
        }
        cmd.addAll(extra);
        return launch(port, dir, cmd);
    }

    private static RedisProcess launch(int port, Path dir, List<String> cmd) throws IOException, InterruptedException {
        Process process = new ProcessBuilder(cmd).redirectErrorStream(true)
                .redirectOutput(ProcessBuilder.Redirect.appendTo(dir.resolve("server.log").toFile())).start();
        RedisProcess p = new RedisProcess(port, process, dir, List.copyOf(cmd));
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (System.nanoTime() < deadline) {
            if (!process.isAlive()) {
                throw new IOException("redis-server on " + port + " exited: " + Files.readString(dir.resolve("server.log")));
            }
            if (p.cli("PING").trim().equals("PONG")) {
                return p;
            }
            Thread.sleep(50);
        }
        p.stop();
        throw new IOException("redis-server on " + port + " did not answer PING within 10 s");
    }

    /** {@code redis-cli -p port args...}'s output (empty when it fails to connect). */
    public String cli(String... args) {
        List<String> cmd = new ArrayList<>(List.of("redis-cli", "-p", Integer.toString(port)));
        cmd.addAll(List.of(args));
        try {
            return run(cmd);
        } catch (IOException e) {
            return "";
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return "";
        }
    }

    static String run(List<String> cmd) throws IOException, InterruptedException {
        Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
        byte[] out = p.getInputStream().readAllBytes();
        if (!p.waitFor(30, TimeUnit.SECONDS)) {
            p.destroyForcibly();
            throw new IOException(cmd + " timed out");
        }
        String text = new String(out, StandardCharsets.UTF_8);
        if (p.exitValue() != 0) {
            throw new IOException(cmd + " exited " + p.exitValue() + ": " + text);
        }
        return text;
    }

    public void awaitClusterOk() throws InterruptedException, IOException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
        while (System.nanoTime() < deadline) {
            if (cli("CLUSTER", "INFO").contains("cluster_state:ok")) {
                return;
            }
            Thread.sleep(100);
        }
        throw new IOException("cluster node " + port + " not ok within 20 s: " + cli("CLUSTER", "INFO"));
    }

    /** {@code errorstat_<name>}'s count in {@code INFO errorstats} (0 when absent). */
    public long errorstat(String name) {
        for (String line : cli("INFO", "errorstats").split("\r?\n")) {
            if (line.startsWith("errorstat_" + name + ":count=")) {
                String rest = line.substring(("errorstat_" + name + ":count=").length());
                int comma = rest.indexOf(',');
                return Long.parseLong(comma < 0 ? rest.trim() : rest.substring(0, comma));
            }
        }
        return 0;
    }

    /** Freezes this process (SIGSTOP): connections stay open, nothing is answered until {@link #resume()}. */
    public void pause() throws IOException, InterruptedException {
        run(List.of("kill", "-STOP", Long.toString(process.pid())));
    }

    /** Lets a paused process run again (SIGCONT): it then reads and runs what its clients sent meanwhile. */
    public void resume() throws IOException, InterruptedException {
        run(List.of("kill", "-CONT", Long.toString(process.pid())));
    }

    /** Kills this process (SIGKILL: a crash), keeping its directory (nodes.conf) for {@link #restart()}. */
    public void kill() throws InterruptedException {
        process.destroyForcibly().waitFor(10, TimeUnit.SECONDS);
    }

    /** The same server again, on the same port and directory (a Cluster node rejoins with its nodes.conf). */
    public RedisProcess restart() throws IOException, InterruptedException {
        return launch(port, dir, cmd);
    }

    /** Stops this process (never another) and removes its directory. */
    public void stop() {
        process.destroy();
        try {
            if (!process.waitFor(10, TimeUnit.SECONDS)) {
                process.destroyForcibly().waitFor(5, TimeUnit.SECONDS);
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        try (Stream<Path> files = Files.walk(dir)) {
            files.sorted(Comparator.reverseOrder()).forEach(f -> f.toFile().delete());
        } catch (IOException ignored) {
            // a temp directory left behind is harmless
        }
    }
}
