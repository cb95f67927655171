package dev.redisratelimit.gateway.test;

import java.io.File;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

/** (A copy of the starter's test helper: test classes are not published.)
 *
 * A real redis-server with the module loaded ($RL_MODULE), on a free port,
 * in a temporary directory; stopped (and only it) by {@link #close()}. Can be
 * stopped and started again on the same port to test a Redis outage.
 */
public final class RedisServer implements AutoCloseable {

    /** The module: $RL_MODULE, else the repository's release build, else the prebuilt copy. */
    public static String module() {
        String m = System.getenv("RL_MODULE");
        if (m != null && !m.isBlank() && new File(m).isFile()) {
            return m;
        }
        for (String c : new String[] {"../../../../target/release/libredis_ratelimit.so", "../../../target/release/libredis_ratelimit.so",
                "/work/prebuilt/libredis_ratelimit.so"}) {
            if (new File(c).isFile()) {
                return new File(c).getAbsolutePath();
            }
        }
        throw new IllegalStateException("set RL_MODULE to the module's .so (make build makes target/release/libredis_ratelimit.so)");
    }

    public static String binary() {
        String s = System.getenv("RL_REDIS_SERVER");
        return s == null || s.isBlank() ? "redis-server" : s;
    }

    public final int port;
    private final Path dir;
    private final List<String> extra;
    private Process process;
    private boolean withModule = true;

    private RedisServer(int port, List<String> extra) throws IOException {
        this.port = port;
        this.extra = extra;
        this.dir = Files.createTempDirectory("rl-redis-" + port);
    }

    /** A server without the module (to test the start-up check, and the Functions backend). */
    public static RedisServer launchWithoutModule(String... extraArgs) throws IOException, InterruptedException {
        RedisServer s = new RedisServer(freePort(), List.of(extraArgs));
        s.withModule = false;
        s.start();
        return s;
    }

    public static RedisServer launch(String... extraArgs) throws IOException, InterruptedException {
        RedisServer s = new RedisServer(freePort(), List.of(extraArgs));
        s.start();
        return s;
    }

    public synchronized void start() throws IOException, InterruptedException {
        List<String> cmd = new ArrayList<>(List.of(binary(), "--port", Integer.toString(port), "--bind", "127.0.0.1",
                "--save", "", "--appendonly", "no", "--dir", dir.toString()));
        if (withModule) {
            cmd.addAll(List.of("--loadmodule", module()));
        }
        cmd.addAll(extra);
        process = new ProcessBuilder(cmd).redirectErrorStream(true).redirectOutput(dir.resolve("log").toFile()).start();
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (System.nanoTime() < deadline) {
            if (!process.isAlive()) {
                throw new IllegalStateException("redis-server exited: " + Files.readString(dir.resolve("log")));
            }
            try (Socket ignored = new Socket("127.0.0.1", port)) {
                return;
            } catch (IOException e) {
                Thread.sleep(20);
            }
        }
        throw new IllegalStateException("redis-server did not listen on " + port);
    }

    /** Stops the process (SIGKILL: an outage, not a shutdown). */
    public synchronized void stop() throws InterruptedException {
        if (process != null) {
            process.destroyForcibly();
            process.waitFor(10, TimeUnit.SECONDS);
            process = null;
        }
    }

    /** Freezes the process (connections accepted, never answered). */
    public void pause() throws IOException, InterruptedException {
        new ProcessBuilder("kill", "-STOP", Long.toString(process.pid())).start().waitFor();
    }

    public void resume() throws IOException, InterruptedException {
        new ProcessBuilder("kill", "-CONT", Long.toString(process.pid())).start().waitFor();
    }

    public String url() {
        return "redis://127.0.0.1:" + port;
    }

    /** Runs redis-cli against this server and returns its output. */
    public String cli(String... args) throws IOException, InterruptedException {
        List<String> cmd = new ArrayList<>(List.of("redis-cli", "-p", Integer.toString(port)));
        cmd.addAll(List.of(args));
        Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
        String out = new String(p.getInputStream().readAllBytes()).trim();
        p.waitFor(10, TimeUnit.SECONDS);
        return out;
    }

    @Override
    public void close() throws InterruptedException {
        stop();
    }

    public static int freePort() throws IOException {
        try (ServerSocket s = new ServerSocket()) {
            s.setReuseAddress(true);
            s.bind(new InetSocketAddress("127.0.0.1", 0));
            return s.getLocalPort();
        }
    }
}
