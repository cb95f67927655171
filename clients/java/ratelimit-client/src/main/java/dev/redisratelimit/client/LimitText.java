package dev.redisratelimit.client;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Limits as text, as slowapi and {@code limits} write them: {@code "5/minute;100/hour"}.
 *
 * <p>Each item is a sliding window (RL.CHECK), named for what it says so the
 * RateLimit headers read like the text: {@code 5/minute} → {@code 5-per-1m},
 * {@code 10 per 5 minutes} → {@code 10-per-5m}. The grammar, the names and the
 * refusals (by {@link InvalidLimitTextException#field()}) are the Python and
 * Node clients' too (golden cases in {@code clients/conformance/cases/limits-text.json}).
 */
public final class LimitText {

    // <count> ("/" | "per") [<amount>] <unit>; spaces are ASCII space and tab
    // only and the case folding ASCII only, so the three clients' regex engines agree.
    private static final Pattern ITEM =
            Pattern.compile("([0-9]+)[ \\t]*(?:/|per)[ \\t]*([0-9]+)?[ \\t]*(second|minute|hour|day)s?", Pattern.CASE_INSENSITIVE);
    private static final Pattern SEPARATORS = Pattern.compile("[;,|]");
    private static final Map<String, Long> UNIT_MS =
            Map.of("second", 1_000L, "minute", 60_000L, "hour", 3_600_000L, "day", 86_400_000L);

    private LimitText() {
    }

    /** A limits text refused, naming the field the three clients share: limits, count, window, limit_name. */
    public static final class InvalidLimitTextException extends RateLimitArgumentException {
        private static final long serialVersionUID = 1L;

        InvalidLimitTextException(String field, String message) {
            super(field, message);
        }
    }

    /**
     * The sliding windows {@code text} names ({@code ;}, {@code ,} or {@code |} between items).
     * Refused: {@code limits} (null, empty, an item that does not parse, a unit other than
     * second/minute/hour/day), {@code count} (0 or above 2^53-1), {@code window} (0 or above
     * 2^53-1 ms), {@code limit_name} (two items of one count and period).
     */
    public static List<Limit> parse(String text) {
        if (text == null) {
            throw new InvalidLimitTextException("limits", "limits text is required");
        }
        List<Limit> out = new ArrayList<>();
        var names = new HashSet<String>();
        for (String raw : SEPARATORS.split(text, -1)) {
            String item = raw.replaceAll("^[ \\t]+|[ \\t]+$", "");
            Matcher m = ITEM.matcher(item);
            if (!m.matches()) {
                throw new InvalidLimitTextException("limits", "invalid limit '" + item + "' in '" + text
                        + "': expected e.g. '5/minute', '100 per hour' or '10 per 5 minutes' (second, minute, hour, day)");
            }
            long count = bounded("count", m.group(1), 1);
            long amount = bounded("window", m.group(2) == null ? "1" : m.group(2), 1);
            String unit = m.group(3).toLowerCase(Locale.ROOT);
            long unitMs = UNIT_MS.get(unit);
            if (amount > Limits.MAX / unitMs) {
                throw new InvalidLimitTextException("window", "invalid window in '" + item + "': above 2^53-1 ms");
            }
            out.add(Limit.slidingWindow(count + "-per-" + amount + unit.charAt(0), count, Duration.ofMillis(amount * unitMs)));
        }
        for (Limit l : out) {
            if (!names.add(l.name())) {
                throw new InvalidLimitTextException("limit_name", "two items of one count and period in '" + text + "'");
            }
        }
        return out;
    }

    private static long bounded(String field, String digits, long low) {
        String d = digits.replaceFirst("^0+(?=[0-9])", "");
        if (d.length() > 16 || Long.parseLong(d) > Limits.MAX || Long.parseLong(d) < low) {
            throw new InvalidLimitTextException(field, "invalid " + field + " '" + digits + "': expected an integer from "
                    + low + " to " + Limits.MAX);
        }
        return Long.parseLong(d);
    }
}
