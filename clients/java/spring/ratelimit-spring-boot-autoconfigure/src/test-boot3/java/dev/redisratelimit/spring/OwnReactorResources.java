package dev.redisratelimit.spring;

import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.http.client.ReactorResourceFactory;

/**
 * Boot 3.5 only (the Boot 3.5 build adds src/test-boot3/java): TestApp, the
 * MVC test app, gets a ReactorResourceFactory of its own. Boot 3.5 gives every
 * app with Reactor Netty on the class path (WebClient's auto-configuration) one
 * on Reactor Netty's global event loops and disposes those when the app
 * closes, which stopped the server of ReactiveTestApp running in the same JVM
 * (WebFluxHttpTest.answersByteForByteAsTheMvcAdapter starts and closes a TestApp
 * beside it). Boot 4 does not do this in an MVC app. Found by TestApp's
 * component scan.
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
