package dev.redisratelimit.spring.core;

import dev.redisratelimit.spring.annotation.LimitType;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;

/**
 * A policy grouped into RL.ALL clauses once, at start-up. Limits with the same
 * type, scope (global or per key), zone, cost and settlement share a clause;
 * the duplicate-prevention check, when on, is the last item.
 */
public final class CompiledPolicy {

    private final PolicySpec spec;
    private final List<Clause> clauses;
    private final List<String> itemNames;

    public CompiledPolicy(PolicySpec spec) {
        this.spec = spec;
        List<Clause> out = new ArrayList<>();
        List<LimitSpec> limits = spec.limits();
        for (int i = 0; i < limits.size(); i++) {
            LimitSpec l = limits.get(i);
            Clause joined = null;
            if (l.type() != LimitType.CONCURRENCY && l.type() != LimitType.LOCKOUT) {
                for (int c = 0; c < out.size(); c++) {
                    Clause k = out.get(c);
                    LimitSpec first = limits.get(k.items().get(0));
                    if (k.type() == l.type() && k.global() == l.global()
                            && Objects.equals(k.zone(), l.type() == LimitType.QUOTA ? l.zone() : null)
                            && Objects.equals(k.cost(), l.cost()) && Objects.equals(k.settle(), l.settle())
                            && !conflicts(l, k, limits)) {
                        List<Integer> items = new ArrayList<>(k.items());
                        items.add(i);
                        joined = new Clause(k.type(), List.copyOf(items), k.global(), k.zone(), k.cost(), k.settle(), false,
                                k.keyName() + "+" + l.name());
                        out.set(c, joined);
                        break;
                    }
                    Objects.requireNonNull(first);
                }
            }
            if (joined == null) {
                out.add(new Clause(l.type(), List.of(i), l.global(), l.type() == LimitType.QUOTA ? l.zone() : null,
                        l.cost(), l.settle(), false, l.name()));
            }
        }
        List<String> names = new ArrayList<>();
        for (LimitSpec l : limits) {
            names.add(l.name());
        }
        if (spec.duplicateWindow() != null) {
            out.add(new Clause(LimitType.SLIDING_WINDOW, List.of(limits.size()), false, null, null, null, true, "duplicate"));
            names.add("duplicate");
        }
        for (Clause c : out) {
            LimitSpec.require(c.items().size() <= 64, "policy '" + spec.name() + "': more than 64 rules in one clause");
        }
        LimitSpec.require(out.size() <= 64, "policy '" + spec.name() + "': more than 64 clauses");
        this.clauses = List.copyOf(out);
        this.itemNames = List.copyOf(names);
    }

    // A quota period or a bucket window may appear once per clause (the module keeps state per period/window).
    private static boolean conflicts(LimitSpec l, Clause k, List<LimitSpec> limits) {
        for (int idx : k.items()) {
            LimitSpec o = limits.get(idx);
            if (l.type() == LimitType.QUOTA && o.period() == l.period()) {
                return true;
            }
            if (l.type() == LimitType.TOKEN_BUCKET && o.window().equals(l.window())) {
                return true;
            }
        }
        return false;
    }

    public PolicySpec spec() {
        return spec;
    }

    public String name() {
        return spec.name();
    }

    public List<Clause> clauses() {
        return clauses;
    }

    public List<String> itemNames() {
        return itemNames;
    }

    public boolean isLockout() {
        return spec.limits().get(0).type() == LimitType.LOCKOUT;
    }

    /** The limit behind item i, or null for the duplicate item. */
    public LimitSpec limitOf(int item) {
        return item < spec.limits().size() ? spec.limits().get(item) : null;
    }
}
