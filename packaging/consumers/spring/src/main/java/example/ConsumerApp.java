package example;

import dev.redisratelimit.spring.annotation.Limit;
import dev.redisratelimit.spring.annotation.RateLimited;
import java.util.Map;
import org.springframework.boot.SpringApplication;
import org.springframework.boot.autoconfigure.SpringBootApplication;
import org.springframework.web.bind.annotation.GetMapping;
import org.springframework.web.bind.annotation.RestController;

/** One endpoint, one call a minute: the second call is refused by the module (429). */
@SpringBootApplication
@RestController
public class ConsumerApp {
    public static void main(String[] args) {
        SpringApplication.run(ConsumerApp.class, args);
    }

    @GetMapping("/hello")
    @RateLimited(key = "'consumer'", limits = @Limit(name = "once", count = 1, window = "60s"))
    Map<String, String> hello() {
        return Map.of("hello", "world");
    }
}
