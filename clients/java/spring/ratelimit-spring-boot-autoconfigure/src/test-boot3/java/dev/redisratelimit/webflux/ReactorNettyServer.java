package dev.redisratelimit.webflux;

import org.springframework.boot.web.embedded.netty.NettyReactiveWebServerFactory;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.http.client.ReactorResourceFactory;

/**
 * Boot 3.5 only (the Boot 3.5 build adds src/test-boot3/java): ReactiveTestApp
 * on Reactor Netty, as on Boot 4. This module's test class path holds Tomcat
 * too (for the MVC tests), and Boot 3.5 then starts a reactive app on Tomcat,
 * where no thread is an event loop; an app with spring-boot-starter-webflux
 * alone runs on Reactor Netty on both lines. Found by ReactiveTestApp's
 * component scan. (See also dev.redisratelimit.spring.OwnReactorResources.)
 */
@Configuration(proxyBeanMethods = false)
class ReactorNettyServer {

    @Bean
    NettyReactiveWebServerFactory nettyReactiveWebServerFactory(ReactorResourceFactory resources) {
        NettyReactiveWebServerFactory factory = new NettyReactiveWebServerFactory();
        factory.setResourceFactory(resources); // as Boot 3.5's own Netty configuration does
        return factory;
    }
}
