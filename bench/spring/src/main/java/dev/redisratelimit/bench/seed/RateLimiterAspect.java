package dev.redisratelimit.bench.seed;

import jakarta.servlet.http.HttpServletRequest;
import org.aspectj.lang.JoinPoint;
import org.aspectj.lang.annotation.Aspect;
import org.aspectj.lang.annotation.Before;
import org.aspectj.lang.reflect.MethodSignature;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.data.redis.core.RedisTemplate;
import org.springframework.data.redis.core.script.RedisScript;
import org.springframework.stereotype.Component;
import org.springframework.web.context.request.RequestContextHolder;
import org.springframework.web.context.request.ServletRequestAttributes;

import java.lang.reflect.Method;
import java.util.List;

/**
 * Seed 000's {@code RateLimiterAspect}: {@code boBefore} and {@code getRules}
 * as the seed prints them (its {@code ListUtil.of} is {@code List.of} here);
 * {@code getCombineKey} as the seed describes it ("prefix:ip/userId:className-methodName";
 * the user id is the {@code X-User} header, the seed's security context having no
 * place in a benchmark). Contestant (b) of make bench-java.
 */
@Aspect
@Component
public class RateLimiterAspect {
    private static final Logger log = LoggerFactory.getLogger(RateLimiterAspect.class);

    @Autowired
    private RedisTemplate<String, Object> redisTemplate;
    @Autowired
    private RedisScript<Boolean> limitScript;

    @Before(value = "@annotation(rateLimiter)")
    public void boBefore(JoinPoint joinPoint, RateLimiter rateLimiter) {
        String key = getCombineKey(rateLimiter, joinPoint);
        try {
            Boolean flag = redisTemplate.execute(limitScript,
                    List.of(key, String.valueOf(System.currentTimeMillis())),
                    (Object[]) getRules(rateLimiter));
            if (Boolean.TRUE.equals(flag)) {
                log.error("ip: '{}' 拦截到一个请求 RedisKey: '{}'", request().getRemoteAddr(), key);
                throw new ServiceException(rateLimiter.message());
            }
        } catch (ServiceException e) {
            throw e;
        } catch (Exception e) {
            e.printStackTrace();
        }
    }

    private Long[] getRules(RateLimiter rateLimiter) {
        int capacity = rateLimiter.rules().length << 1;
        Long[] args = new Long[rateLimiter.preventDuplicate() ? capacity + 2 : capacity];
        int index = 0;
        if (rateLimiter.preventDuplicate()) {
            RateRule r = rateLimiter.preventDuplicateRule();
            args[index++] = r.count();
            args[index++] = r.timeUnit().toMillis(r.time());
        }
        for (RateRule rule : rateLimiter.rules()) {
            args[index++] = rule.count();
            args[index++] = rule.timeUnit().toMillis(rule.time());
        }
        return args;
    }

    private String getCombineKey(RateLimiter rateLimiter, JoinPoint point) {
        StringBuilder key = new StringBuilder(rateLimiter.key());
        if (rateLimiter.limitType() == LimitType.IP) {
            key.append(request().getRemoteAddr()).append(':');
        } else if (rateLimiter.limitType() == LimitType.USER_ID) {
            key.append(request().getHeader("X-User")).append(':');
        }
        Method method = ((MethodSignature) point.getSignature()).getMethod();
        return key.append(method.getDeclaringClass().getSimpleName()).append('-').append(method.getName()).toString();
    }

    private static HttpServletRequest request() {
        return ((ServletRequestAttributes) RequestContextHolder.currentRequestAttributes()).getRequest();
    }
}
