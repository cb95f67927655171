package dev.redisratelimit.it.support;

import java.io.IOException;
import java.net.ServerSocket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.extension.ExtensionContext;
import org.junit.jupiter.api.extension.ParameterContext;
import org.junit.jupiter.api.extension.ParameterResolver;

/**
 * A JUnit 5 extension that starts real {@code redis-server} processes on free
 * ports with the module loaded ({@code --loadmodule $RL_MODULE}) and stops
 * them — only them — when the test run ends. Resolves test parameters of type
 * {@link Standalone} (one server), {@link Cluster} (three primaries, slots
 * spread by {@code redis-cli --cluster create}) and {@link Plain} (a server
 * without the module). Each topology is started once per run, on first use.
 */
public final class RedisServers implements ParameterResolver {

    private static final ExtensionContext.Namespace NS = ExtensionContext.Namespace.create(RedisServers.class);

    /** One server with the module. */
    public record Standalone(RedisProcess server) {
        public int port() {
            return server.port();
        }

        public String uri() {
            return "redis://127.0.0.1:" + port();
        }
    }

    /** Three primaries with the module, slots spread over them. */
    public record Cluster(List<RedisProcess> nodes) {
        public List<Integer> ports() {
            return nodes.stream().map(RedisProcess::port).toList();
        }

        /** {@code errorstat_MOVED} summed over the nodes ({@code INFO errorstats}). */
        public long movedErrors() {
            long sum = 0;
            for (RedisProcess node : nodes) {
                sum += node.errorstat("MOVED");
            }
            return sum;
        }
    }

    /** One server without the module (for the module check). */
    public record Plain(RedisProcess server) {
        public int port() {
            return server.port();
        }
    }

    /** Three primaries without the module (the Functions backend). */
    public record PlainCluster(Cluster cluster) {
    }

    /** One server with the module and MODULE allowed (a test unloads it: a failover to a server without it). */
    public record Unloadable(RedisProcess server) {
        public int port() {
            return server.port();
        }
    }

    @Override
    public boolean supportsParameter(ParameterContext parameter, ExtensionContext context) {
        Class<?> type = parameter.getParameter().getType();
        return type == Standalone.class || type == Cluster.class || type == Plain.class || type == PlainCluster.class
                || type == Unloadable.class;
    }

    @Override
    public Object resolveParameter(ParameterContext parameter, ExtensionContext context) {
        Class<?> type = parameter.getParameter().getType();
        ExtensionContext.Store store = context.getRoot().getStore(NS);
        return store.getOrComputeIfAbsent(type, t -> started(type), Started.class).value;
    }

    /** A topology and the processes to stop when the root context closes. */
    private static final class Started implements AutoCloseable {
        final Object value;
        final List<RedisProcess> processes;

        Started(Object value, List<RedisProcess> processes) {
            this.value = value;
            this.processes = processes;
        }

        @Override
        public void close() {
            for (RedisProcess p : processes) {
                p.stop();
            }
        }
    }

    private static Started started(Class<?> type) {
        try {
            if (type == Standalone.class) {
                RedisProcess p = RedisProcess.start(freePort(), module(), List.of());
                return new Started(new Standalone(p), List.of(p));
            }
            if (type == Plain.class) {
                RedisProcess p = RedisProcess.start(freePort(), null, List.of());
                return new Started(new Plain(p), List.of(p));
            }
            if (type == Unloadable.class) {
                RedisProcess p = RedisProcess.start(freePort(), module(), List.of("--enable-module-command", "yes"));
                return new Started(new Unloadable(p), List.of(p));
            }
            if (type == PlainCluster.class) {
                Started c = startCluster(null);
                return new Started(new PlainCluster((Cluster) c.value), c.processes);
            }
            return startCluster(module());
        } catch (IOException | InterruptedException e) {
            throw new IllegalStateException("could not start redis-server: " + e, e);
        }
    }

    private static Started startCluster(Path module) throws IOException, InterruptedException {
        List<RedisProcess> nodes = new ArrayList<>();
        try {
            for (int i = 0; i < 3; i++) {
                nodes.add(RedisProcess.start(freeClusterPort(), module, List.of("--cluster-enabled", "yes",
                        "--cluster-node-timeout", "5000")));
            }
            List<String> create = new ArrayList<>(List.of("redis-cli", "--cluster", "create"));
            for (RedisProcess n : nodes) {
                create.add("127.0.0.1:" + n.port());
            }
            create.addAll(List.of("--cluster-replicas", "0", "--cluster-yes"));
            RedisProcess.run(create);
            for (RedisProcess n : nodes) {
                n.awaitClusterOk();
            }
            return new Started(new Cluster(List.copyOf(nodes)), List.copyOf(nodes));
        } catch (IOException | InterruptedException | RuntimeException e) {
            nodes.forEach(RedisProcess::stop);
            throw e;
        }
    }

    /** A server with the module of the test's own (a test that pauses or kills it must not share it); the caller stops it. */
    public static RedisProcess ownStandalone() throws IOException, InterruptedException {
        return RedisProcess.start(freePort(), module(), List.of());
    }

    /** A server with the module and MODULE allowed, of the test's own (a test that unloads it); the caller stops it. */
    public static RedisProcess ownUnloadable() throws IOException, InterruptedException {
        return RedisProcess.start(freePort(), module(), List.of("--enable-module-command", "yes"));
    }

    /**
     * A three-primary Cluster of the test's own (a test that kills a node must
     * not share it), run with {@code extra} server arguments; the caller stops
     * its nodes.
     */
    public static Cluster ownCluster(List<String> extra) throws IOException, InterruptedException {
        List<String> args = new ArrayList<>(List.of("--cluster-enabled", "yes", "--cluster-node-timeout", "5000"));
        args.addAll(extra);
        List<RedisProcess> nodes = new ArrayList<>();
        try {
            for (int i = 0; i < 3; i++) {
                nodes.add(RedisProcess.start(freeClusterPort(), module(), args));
            }
            List<String> create = new ArrayList<>(List.of("redis-cli", "--cluster", "create"));
            for (RedisProcess n : nodes) {
                create.add("127.0.0.1:" + n.port());
            }
            create.addAll(List.of("--cluster-replicas", "0", "--cluster-yes"));
            RedisProcess.run(create);
            for (RedisProcess n : nodes) {
                n.awaitClusterOk();
            }
            return new Cluster(List.copyOf(nodes));
        } catch (IOException | InterruptedException | RuntimeException e) {
            nodes.forEach(RedisProcess::stop);
            throw e;
        }
    }

    static Path module() {
        String module = System.getenv("RL_MODULE");
        if (module == null || module.isBlank() || !Files.isRegularFile(Path.of(module))) {
            throw new IllegalStateException("RL_MODULE must name the built module (libredis_ratelimit.so); got '" + module
                    + "'. Run through `make java-test`, or export RL_MODULE=/path/to/libredis_ratelimit.so");
        }
        return Path.of(module);
    }

    static int freePort() throws IOException {
        try (ServerSocket socket = new ServerSocket(0)) {
            socket.setReuseAddress(true);
            return socket.getLocalPort();
        }
    }

    /** A free port whose cluster bus port (+10000) is free too. */
    static int freeClusterPort() throws IOException {
        for (int attempt = 0; attempt < 200; attempt++) {
            int port = freePort();
            if (port + 10000 > 65535) {
                continue;
            }
            try (ServerSocket bus = new ServerSocket(port + 10000)) {
                return port;
            } catch (IOException busy) {
                // try another
            }
        }
        throw new IOException("no free port pair (port, port+10000) found");
    }
}
