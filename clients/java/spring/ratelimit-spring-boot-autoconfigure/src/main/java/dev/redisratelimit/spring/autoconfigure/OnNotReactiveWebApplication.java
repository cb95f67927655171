package dev.redisratelimit.spring.autoconfigure;

import org.springframework.boot.autoconfigure.condition.ConditionalOnWebApplication;
import org.springframework.boot.autoconfigure.condition.NoneNestedConditions;

/** Matches a servlet app or an app without a web server: the MVC interceptor's; a WebFlux app gets the reactive one. */
class OnNotReactiveWebApplication extends NoneNestedConditions {

    OnNotReactiveWebApplication() {
        super(ConfigurationPhase.REGISTER_BEAN);
    }

    @ConditionalOnWebApplication(type = ConditionalOnWebApplication.Type.REACTIVE)
    static class Reactive {
    }
}
