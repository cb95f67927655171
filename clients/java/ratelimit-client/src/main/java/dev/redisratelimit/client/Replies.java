package dev.redisratelimit.client;

import java.util.ArrayList;
import java.util.List;

/** Reads the raw replies (SPEC's reply tables) into decisions. */
final class Replies {

    private Replies() {
    }

    static List<?> array(Object reply, int min, String what) {
        if (!(reply instanceof List<?> list) || list.size() < min) {
            throw new RateLimitException("unexpected reply " + reply + ": expected " + what);
        }
        return list;
    }

    static long integer(Object value, Object reply) {
        if (value instanceof Long l) {
            return l;
        }
        if (value instanceof Integer i) {
            return i;
        }
        throw new RateLimitException("unexpected reply element " + value + " in " + reply + ": expected an integer");
    }

    static RuleState ruleState(Object reply) {
        List<?> r = array(reply, 6, "six integers");
        return new RuleState(integer(r.get(0), reply) == 1, (int) integer(r.get(1), reply), integer(r.get(2), reply),
                integer(r.get(3), reply), integer(r.get(4), reply), integer(r.get(5), reply));
    }

    static Decision decision(Object reply) {
        List<?> r = array(reply, 6, "six integers");
        if (r.size() != 6) {
            throw new RateLimitException("unexpected reply " + reply + ": expected six integers");
        }
        return new Decision(integer(r.get(0), reply) == 1, (int) integer(r.get(1), reply), integer(r.get(2), reply),
                integer(r.get(3), reply), integer(r.get(4), reply), integer(r.get(5), reply));
    }

    static LeaseDecision lease(Object reply) {
        List<?> r = array(reply, 7, "six integers and a token");
        Object token = r.get(6);
        if (token != null && !(token instanceof String)) {
            throw new RateLimitException("unexpected lease token " + token + " in " + reply);
        }
        return new LeaseDecision(integer(r.get(0), reply) == 1, (int) integer(r.get(1), reply), integer(r.get(2), reply),
                integer(r.get(3), reply), integer(r.get(4), reply), integer(r.get(5), reply), (String) token);
    }

    static AllDecision all(Object reply, boolean detailsAsked) {
        List<?> r = array(reply, 7, "seven integers");
        List<List<RuleState>> details = null;
        if (detailsAsked) {
            details = new ArrayList<>();
            for (Object clause : r.subList(7, r.size())) {
                List<RuleState> rules = new ArrayList<>();
                for (Object rule : array(clause, 0, "one array per rule")) {
                    rules.add(ruleState(rule));
                }
                details.add(List.copyOf(rules));
            }
            details = List.copyOf(details);
        } else if (r.size() != 7) {
            throw new RateLimitException("unexpected reply " + reply + ": expected seven integers");
        }
        return new AllDecision(integer(r.get(0), reply) == 1, (int) integer(r.get(1), reply), (int) integer(r.get(2), reply),
                integer(r.get(3), reply), integer(r.get(4), reply), integer(r.get(5), reply), integer(r.get(6), reply), details);
    }

    static DayHourDecision dayHour(Object reply, long dayLimit, long hourLimit) {
        List<?> r = array(reply, 2, "two integers");
        return new DayHourDecision(integer(r.get(0), reply), integer(r.get(1), reply), dayLimit, hourLimit);
    }

    static LockoutDecision lockout(Object reply) {
        List<?> r = array(reply, 3, "three integers");
        return new LockoutDecision(integer(r.get(0), reply) == 1, integer(r.get(1), reply), integer(r.get(2), reply));
    }

    static List<Long> counts(Object reply) {
        List<?> r = array(reply, 0, "an array of integers");
        List<Long> out = new ArrayList<>(r.size());
        for (Object v : r) {
            out.add(integer(v, reply));
        }
        return List.copyOf(out);
    }
}
