package dev.redisratelimit.spring;

import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.http.client.ReactorResourceFactory;

/**
 * TestApp, the MVC test app, gets a ReactorResourceFactory of its own (not
 * Reactor Netty's global event loops). An app with Reactor Netty on the class
 * path may be given one on the global loops, disposed when the app closes;
 * that stopped the server of ReactiveTestApp running in the same JVM
 * (WebFluxHttpTest.answersByteForByteAsTheMvcAdapter starts and closes a
 * TestApp beside it): requests left unanswered, "event executor terminated".
 * Seen on Boot 3.5 and, in full-module runs, on Boot 4. Found by TestApp's
 * component scan; in production an app is MVC or WebFlux, one per JVM.
 */
@Configuration(proxyBeanMethods = false)
class OwnReactorResources {

    @Bean
    ReactorResourceFactory reactorResourceFactory() {
        ReactorResourceFactory factory = new ReactorResourceFactory();
        factory.setUseGlobalResources(false);
        return factory;
    }
}
