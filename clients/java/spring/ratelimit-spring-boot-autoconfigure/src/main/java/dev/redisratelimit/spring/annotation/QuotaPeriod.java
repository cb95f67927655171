package dev.redisratelimit.spring.annotation;

/** RL.QUOTA's calendar periods; {@link #seconds()} is the nominal length sent as a RateLimit-Policy {@code w}. */
public enum QuotaPeriod {
    MINUTE(60), HOUR(3600), DAY(86400), WEEK(604800), MONTH(2592000), YEAR(31536000);

    private final long seconds;

    QuotaPeriod(long seconds) {
        this.seconds = seconds;
    }

    public long seconds() {
        return seconds;
    }
}
