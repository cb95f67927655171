package dev.redisratelimit.spring.annotation;

import org.aopalliance.aop.Advice;
import org.springframework.aop.framework.autoproxy.AbstractBeanFactoryAwareAdvisingPostProcessor;
import org.springframework.aop.support.ComposablePointcut;
import org.springframework.aop.support.DefaultPointcutAdvisor;
import org.springframework.aop.support.annotation.AnnotationMatchingPointcut;
import org.springframework.beans.factory.ObjectProvider;
import org.springframework.util.ClassUtils;

/**
 * Proxies beans with {@link RateLimited} methods or classes (as Spring's own
 * MethodValidationPostProcessor does for {@code @Validated}: no AspectJ
 * needed), and resolves every such method's policy when the bean is created,
 * so bad configuration fails the application's start.
 */
public final class RateLimitAdvisingPostProcessor extends AbstractBeanFactoryAwareAdvisingPostProcessor {

    private final ObjectProvider<AnnotationPolicies> policies;

    private final boolean blocking;

    public RateLimitAdvisingPostProcessor(ObjectProvider<AnnotationPolicies> policies, Advice interceptor) {
        this(policies, interceptor, false);
    }

    /** {@code blocking}: the interceptor closes the permit when the method returns (MVC, no web stack). */
    public RateLimitAdvisingPostProcessor(ObjectProvider<AnnotationPolicies> policies, Advice interceptor, boolean blocking) {
        this.policies = policies;
        this.blocking = blocking;
        // Once or repeated (then the compiler writes the container, RateLimited.List), on the class or the method.
        ComposablePointcut pointcut = new ComposablePointcut(new AnnotationMatchingPointcut(RateLimited.class, true))
                .union(new AnnotationMatchingPointcut(null, RateLimited.class, true))
                .union(new AnnotationMatchingPointcut(RateLimited.List.class, true))
                .union(new AnnotationMatchingPointcut(null, RateLimited.List.class, true));
        this.advisor = new DefaultPointcutAdvisor(pointcut, interceptor);
        setProxyTargetClass(true);
        setBeforeExistingAdvisors(true);
    }

    @Override
    public Object postProcessAfterInitialization(Object bean, String beanName) {
        Class<?> type = ClassUtils.getUserClass(bean);
        if (isEligible(bean, beanName)) {
            policies.getObject().validate(type, blocking);
        }
        return super.postProcessAfterInitialization(bean, beanName);
    }
}
