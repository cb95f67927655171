package dev.redisratelimit.spring.autoconfigure;

import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.stream.Collectors;
import org.springframework.boot.context.properties.bind.BindException;
import org.springframework.boot.context.properties.bind.BindHandler;
import org.springframework.boot.context.properties.bind.Bindable;
import org.springframework.boot.context.properties.bind.Binder;
import org.springframework.boot.context.properties.bind.PropertySourcesPlaceholdersResolver;
import org.springframework.boot.context.properties.bind.UnboundConfigurationPropertiesException;
import org.springframework.boot.context.properties.bind.handler.NoUnboundElementsBindHandler;
import org.springframework.boot.context.properties.source.ConfigurationProperty;
import org.springframework.boot.context.properties.source.ConfigurationPropertyName;
import org.springframework.boot.context.properties.source.ConfigurationPropertySource;
import org.springframework.boot.context.properties.source.ConfigurationPropertySources;
import org.springframework.boot.context.properties.source.IterableConfigurationPropertySource;
import org.springframework.boot.convert.ApplicationConversionService;
import org.springframework.core.env.ConfigurableEnvironment;
import org.springframework.core.env.Environment;
import org.springframework.core.env.SystemEnvironmentPropertySource;

/**
 * {@code ratelimit.*} bound strictly: a key the starter does not know (a
 * misspelling such as {@code on-redis-dwn}, {@code ratelimit.polices},
 * {@code routes} written as a map) fails the start naming it, instead of
 * leaving a limit silently unapplied (issue 35).
 *
 * <p>Spring Boot's own {@code ignoreUnknownFields = false} cannot be used:
 * other modules own sub-trees of {@code ratelimit.} (the gateway module's
 * {@code ratelimit.gateway.*}), which it would reject. So the properties are
 * bound a second time with Spring Boot's {@link NoUnboundElementsBindHandler}
 * over every property source with those sub-trees filtered out. Environment
 * variables are not checked: the relaxed mapping turns any unrelated
 * {@code RATELIMIT_*} variable of the machine into a {@code ratelimit.} key.
 */
public final class StrictProperties {

    /** Sub-trees of {@code ratelimit.} bound by other modules (each checks its own). */
    static final Set<String> OWNED_ELSEWHERE = Set.of("gateway");

    private StrictProperties() {
    }

    /** Throws {@link IllegalStateException} naming every {@code ratelimit.} key that binds to nothing. */
    public static void check(Environment environment) {
        if (!(environment instanceof ConfigurableEnvironment env)) {
            return;
        }
        ConfigurationPropertyName root = ConfigurationPropertyName.of("ratelimit");
        List<ConfigurationPropertyName> others = OWNED_ELSEWHERE.stream().map(root::append).toList();
        List<ConfigurationPropertySource> sources = new ArrayList<>();
        for (ConfigurationPropertySource s : ConfigurationPropertySources.get(env)) {
            if (s instanceof IterableConfigurationPropertySource it) {
                sources.add(it.filter(n -> others.stream().noneMatch(o -> o.equals(n) || o.isAncestorOf(n))));
            } else {
                sources.add(s);
            }
        }
        Binder binder = new Binder(sources, new PropertySourcesPlaceholdersResolver(env), ApplicationConversionService.getSharedInstance());
        BindHandler strict = new NoUnboundElementsBindHandler(BindHandler.DEFAULT,
                s -> !(s.getUnderlyingSource() instanceof SystemEnvironmentPropertySource));
        try {
            binder.bind(root, Bindable.ofInstance(new RateLimitProperties()), strict);
        } catch (BindException e) {
            UnboundConfigurationPropertiesException unbound = unbound(e);
            if (unbound == null) {
                throw e;
            }
            throw new IllegalStateException(message(unbound.getUnboundProperties()), e);
        }
    }

    private static UnboundConfigurationPropertiesException unbound(Throwable e) {
        for (Throwable t = e; t != null; t = t.getCause()) {
            if (t instanceof UnboundConfigurationPropertiesException u) {
                return u;
            }
        }
        return null;
    }

    static String message(Set<ConfigurationProperty> unbound) {
        String keys = unbound.stream()
                .map(p -> p.getName() + (p.getOrigin() == null ? "" : " (" + p.getOrigin() + ")"))
                .collect(Collectors.joining(", "));
        StringBuilder m = new StringBuilder("unknown rate-limit properties, which would be silently ignored: ").append(keys);
        ConfigurationPropertyName routes = ConfigurationPropertyName.of("ratelimit.routes");
        if (unbound.stream().anyMatch(p -> routes.isAncestorOf(p.getName()) && !p.getName().isNumericIndex(2))) {
            m.append(". ratelimit.routes is a list (each entry starts with '- paths:'), not a map of names"
                    + " (give a route its name with 'name:')");
        }
        m.append(". The keys: see RateLimitProperties (ratelimit.enabled, prefix, decision-budget, on-redis-down, policies.<name>."
                + "limits[i].{name,type,count,window,...}, routes[i].{paths,methods,policy,key-resolver,...}, ...)");
        return m.toString();
    }
}
