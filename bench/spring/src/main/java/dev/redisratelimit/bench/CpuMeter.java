package dev.redisratelimit.bench;

import java.lang.management.ManagementFactory;
import java.lang.management.ThreadInfo;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * CPU time spent during a segment, by the JVM (split by thread group) and by
 * redis-server (INFO cpu). Unlike latency, CPU time per request does not
 * depend on how busy the shared machine is: it is what each contestant costs,
 * whoever else runs. The JVM holds the load generator too, so its groups are
 * told apart by thread name: Tomcat's request threads (where the starter's
 * interceptor runs), Lettuce's event loop (the transport), the load
 * generator (its own threads and java.net.http's), the JIT compilers
 * (compiling is warm-up, not a per-request cost; its share shows whether the
 * warm-up was long enough), and the rest of the process (GC, VM threads,
 * threads that ended during the segment).
 */
final class CpuMeter {

    /** Thread groups, in print order; the "rest" is process CPU minus the named groups. */
    static final String[] GROUPS = {"tomcat", "lettuce", "loadgen", "jit", "rest"};

    private static final com.sun.management.ThreadMXBean THREADS = (com.sun.management.ThreadMXBean) ManagementFactory.getThreadMXBean();
    private static final com.sun.management.OperatingSystemMXBean OS =
            (com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean();

    /** A reading at one instant: process CPU, each live thread's {CPU ns, allocated bytes} (by id, with its group), redis-server's CPU. */
    record Reading(long processNanos, Map<Long, long[]> threads, Map<Long, String> groups, long redisNanos, long jitNanos) {}

    static {
        if (THREADS.isThreadCpuTimeSupported() && !THREADS.isThreadCpuTimeEnabled()) {
            THREADS.setThreadCpuTimeEnabled(true);
        }
        if (THREADS.isThreadAllocatedMemorySupported() && !THREADS.isThreadAllocatedMemoryEnabled()) {
            THREADS.setThreadAllocatedMemoryEnabled(true);
        }
    }

    static Reading read(String redisInfoCpu) {
        Map<Long, long[]> cpu = new HashMap<>();
        Map<Long, String> groups = new HashMap<>();
        long[] ids = THREADS.getAllThreadIds();
        ThreadInfo[] infos = THREADS.getThreadInfo(ids);
        for (int i = 0; i < ids.length; i++) {
            if (infos[i] == null) {
                continue;
            }
            long t = THREADS.getThreadCpuTime(ids[i]);
            if (t >= 0) {
                cpu.put(ids[i], new long[] {t, Math.max(0, THREADS.getThreadAllocatedBytes(ids[i]))});
                groups.put(ids[i], group(infos[i].getThreadName()));
            }
        }
        return new Reading(OS.getProcessCpuTime(), cpu, groups, redisCpuNanos(redisInfoCpu), jitCpuNanos());
    }

    /**
     * Nanoseconds of CPU between two readings: per group, "jvm" (the whole
     * process) and "redis"; and "alloc": bytes allocated by the named groups'
     * threads (what the garbage collector, in "rest", has to collect).
     */
    static Map<String, Long> between(Reading a, Reading b) {
        Map<String, Long> out = new LinkedHashMap<>();
        for (String g : GROUPS) {
            out.put(g, 0L);
        }
        long named = 0;
        long alloc = 0;
        for (Map.Entry<Long, long[]> e : b.threads().entrySet()) {
            String g = b.groups().get(e.getKey());
            if (g.equals("rest")) {
                continue;
            }
            long[] before = a.threads().get(e.getKey());
            long d = e.getValue()[0] - (before == null ? 0 : before[0]);
            alloc += e.getValue()[1] - (before == null ? 0 : before[1]);
            out.merge(g, d, Long::sum);
            named += d;
        }
        long process = b.processNanos() - a.processNanos();
        // The JIT compilers' time (ms resolution): code still being compiled is warm-up, not a cost per request.
        long jit = b.jitNanos() - a.jitNanos();
        out.put("jit", jit);
        out.put("rest", Math.max(0, process - named - jit));
        out.put("jvm", process);
        out.put("redis", b.redisNanos() - a.redisNanos());
        out.put("alloc", alloc);
        return out;
    }

    static String group(String threadName) {
        if (threadName.startsWith("http-nio")) {
            return "tomcat";
        }
        if (threadName.startsWith("lettuce-")) {
            return "lettuce";
        }
        if (threadName.startsWith("load-") || threadName.startsWith("HttpClient-")) {
            return "loadgen";
        }
        return "rest";
    }

    /**
     * CPU of the JIT compiler threads, from /proc/self/task (they are not
     * Java threads to ThreadMXBean; CompilationMXBean's time is elapsed, not
     * CPU): utime + stime in clock ticks of 10 ms (USER_HZ 100), so a few ms
     * of error per reading, small against a segment's thousands of requests.
     * 0 where there is no /proc.
     */
    static long jitCpuNanos() {
        long ticks = 0;
        java.io.File[] tasks = new java.io.File("/proc/self/task").listFiles();
        if (tasks == null) {
            return 0;
        }
        for (java.io.File task : tasks) {
            try {
                String stat = java.nio.file.Files.readString(task.toPath().resolve("stat"));
                String comm = stat.substring(stat.indexOf('(') + 1, stat.lastIndexOf(')'));
                if (comm.startsWith("C1 Compiler") || comm.startsWith("C2 Compiler")) {
                    String[] f = stat.substring(stat.lastIndexOf(')') + 2).split(" ");
                    ticks += Long.parseLong(f[11]) + Long.parseLong(f[12]); // utime, stime
                }
            } catch (java.io.IOException | RuntimeException e) {
                // a thread that ended meanwhile
            }
        }
        return ticks * 10_000_000L;
    }

    /** INFO cpu's used_cpu_sys + used_cpu_user (seconds, microsecond resolution) in nanoseconds. */
    static long redisCpuNanos(String info) {
        double s = 0;
        for (String line : info.split("\r?\n")) {
            if (line.startsWith("used_cpu_sys:") || line.startsWith("used_cpu_user:")) {
                s += Double.parseDouble(line.substring(line.indexOf(':') + 1).trim());
            }
        }
        return Math.round(s * 1e9);
    }

    private CpuMeter() {}
}
