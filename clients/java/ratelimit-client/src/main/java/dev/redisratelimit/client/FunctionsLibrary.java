package dev.redisratelimit.client;

import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.time.Instant;
import java.time.ZoneId;
import java.time.ZoneOffset;
import java.time.DateTimeException;
import java.time.zone.ZoneOffsetTransition;
import java.time.zone.ZoneRules;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentMap;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * The project's Redis Functions library (SPEC.md "The Functions library"),
 * as this jar carries it ({@code dev/redisratelimit/client/ratelimit.lua},
 * copied by the build from the repository's {@code functions/ratelimit.lua}),
 * and how an RL call becomes its {@code FCALL}: {@code RL.X key... args} is
 * {@code FCALL rl_x numkeys key... args} ({@code FCALL_RO} for a peek,
 * {@code rl_refund} for a refund, so it runs above maxmemory as the
 * module's refunds do). Pure: {@link BackendTransport} does the I/O.
 */
public final class FunctionsLibrary {

    /** Where the jar keeps the library (a class-path resource). */
    public static final String RESOURCE = "dev/redisratelimit/client/ratelimit.lua";

    private static final Set<String> PEEKS = Set.of("RL.PEEK", "RL.THROTTLEPEEK", "RL.QUOTAPEEK", "RL.LEASEPEEK", "RL.ALLPEEK");
    private static final Set<String> TWO_KEYS = Set.of("RL.DAYHOUR", "RL.LOCKCOUNT");
    private static final Pattern VERSION = Pattern.compile("^local\\s+(?:RL_)?VERSION\\s*=\\s*(\\d+)", Pattern.MULTILINE);
    private static final Pattern OFFSET = Pattern.compile("[+-]\\d\\d:\\d\\d");
    // Zones come from requests: a bounded memo of the ones already judged.
    private static final ConcurrentMap<String, Object> ZONES = new ConcurrentHashMap<>();

    private static volatile String source;

    private FunctionsLibrary() {
    }

    /** The library's Lua source. */
    public static String source() {
        String s = source;
        if (s == null) {
            try (InputStream in = FunctionsLibrary.class.getClassLoader().getResourceAsStream(RESOURCE)) {
                if (in == null) {
                    throw new IllegalStateException(RESOURCE + " is missing from the class path: the ratelimit-client build copies it"
                            + " from the repository's functions/ratelimit.lua");
                }
                s = new String(in.readAllBytes(), StandardCharsets.UTF_8);
            } catch (IOException e) {
                throw new IllegalStateException("reading " + RESOURCE + " failed", e);
            }
            source = s;
        }
        return s;
    }

    /** The {@code RL_VERSION} a library source declares (what its {@code rl_version} answers). */
    public static long versionOf(String source) {
        Matcher m = VERSION.matcher(source);
        if (!m.find()) {
            throw new IllegalStateException("the Functions library has no `local RL_VERSION = <number>` line");
        }
        return Long.parseLong(m.group(1));
    }

    /** The command an operator runs once when the app's user may not run FUNCTION LOAD. */
    public static String loadCommand() {
        return "redis-cli -x FUNCTION LOAD REPLACE < ratelimit.lua (the file: " + RESOURCE + " in the ratelimit-client jar,"
                + " or functions/ratelimit.lua of the release)";
    }

    static boolean functionMissing(String text) {
        return text != null && text.toLowerCase(Locale.ROOT).contains("function not found");
    }

    static boolean moduleMissing(String text) {
        if (text == null) {
            return false;
        }
        String t = text.toLowerCase(Locale.ROOT);
        return t.startsWith("err unknown command") && t.contains("rl.");
    }

    /** An RL call as the library's FCALL, routed by the same key. Other commands pass unchanged. */
    public static RedisCall fcall(RedisCall call) {
        String name = call.command().toUpperCase(Locale.ROOT);
        if (!name.startsWith("RL.")) {
            return call;
        }
        List<String> args = call.args();
        List<String> keys;
        List<String> rest;
        boolean refund;
        if (name.equals("RL.ALL") || name.equals("RL.ALLPEEK")) {
            int n = Integer.parseInt(args.get(0));
            keys = args.subList(1, 1 + n);
            rest = new ArrayList<>(args.subList(1 + n, args.size()));
            refund = allClauses(rest);
        } else {
            int n = TWO_KEYS.contains(name) ? 2 : 1;
            keys = args.subList(0, n);
            rest = new ArrayList<>(args.subList(n, args.size()));
            if ((name.equals("RL.QUOTA") || name.equals("RL.QUOTAPEEK")) && rest.size() > 1) {
                rest.set(1, zone(rest.get(1)));
            }
            refund = (name.equals("RL.CHECK") || name.equals("RL.THROTTLE") || name.equals("RL.QUOTA")) && rest.contains("REFUND");
        }
        String fn = "rl_" + name.substring(3).toLowerCase(Locale.ROOT);
        List<String> out = new ArrayList<>(args.size() + 4);
        String command;
        if (refund) {
            command = "FCALL";
            out.add("rl_refund");
        } else {
            command = PEEKS.contains(name) ? "FCALL_RO" : "FCALL";
            out.add(fn);
        }
        out.add(Integer.toString(keys.size()));
        out.addAll(keys);
        if (refund) {
            out.add(fn.substring(3)); // rl_refund numkeys key... check|throttle|quota|all args...
        }
        out.addAll(rest);
        return new RedisCall(command, out, 2);
    }

    /** Maps RL.ALL's QUOTA clauses' zones in place; whether the call ends with REFUND (TOKEN's and COST's values skipped). */
    private static boolean allClauses(List<String> rest) {
        boolean refund = false;
        for (int i = 1; i < rest.size(); ) {
            String word = rest.get(i).toUpperCase(Locale.ROOT);
            if (word.equals("TOKEN") || word.equals("COST")) {
                i += 2;
            } else if (word.equals("QUOTA") && i + 2 < rest.size()) {
                rest.set(i + 2, zone(rest.get(i + 2)));
                i += 3;
            } else {
                refund |= word.equals("REFUND");
                i += 1;
            }
        }
        return refund;
    }

    /**
     * A zone as the library takes it: {@code UTC} and {@code +HH:MM} as they
     * are; an IANA zone that keeps one offset for the coming year
     * ({@code Asia/Shanghai}) as that offset ({@code +08:00}). A zone with
     * daylight saving (or any offset change ahead within a year) is refused:
     * the library has no time-zone database.
     */
    public static String zone(String zone) {
        if (zone.equals("UTC") || OFFSET.matcher(zone).matches()) {
            return zone;
        }
        Object judged = ZONES.get(zone);
        if (judged == null) {
            judged = judge(zone);
            if (ZONES.size() >= 1024) {
                ZONES.clear();
            }
            ZONES.put(zone, judged);
        }
        if (judged instanceof IllegalArgumentException e) {
            throw new IllegalArgumentException(e.getMessage());
        }
        return (String) judged;
    }

    private static Object judge(String zone) {
        ZoneRules rules;
        try {
            rules = ZoneId.of(zone).getRules();
        } catch (DateTimeException e) {
            return new IllegalArgumentException("invalid zone '" + zone + "': expected an IANA time-zone name or a fixed offset '+HH:MM'");
        }
        Instant now = Instant.now();
        ZoneOffsetTransition next = rules.nextTransition(now);
        if (next != null && next.getInstant().isBefore(now.plus(Duration.ofDays(367)))) {
            return new IllegalArgumentException("zone '" + zone + "' has daylight saving (its UTC offset changes within a year):"
                    + " the Functions library (backend 'functions') takes only UTC and fixed offsets; use the module for this zone,"
                    + " or a fixed offset such as '+01:00'");
        }
        ZoneOffset offset = rules.getOffset(now);
        return offset.getTotalSeconds() == 0 ? "+00:00" : offset.getId();
    }
}
