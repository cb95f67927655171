package dev.redisratelimit.client;

/**
 * RL.DAYHOUR's reply {@code [day, hour]} with the limits it was called with:
 * a count above its limit marks the counter that refused.
 */
public record DayHourDecision(long dayCount, long hourCount, long dayLimit, long hourLimit) {

    public boolean dayRefused() {
        return dayCount > dayLimit;
    }

    public boolean hourRefused() {
        return hourCount > hourLimit;
    }

    public boolean limited() {
        return dayRefused() || hourRefused();
    }

    public boolean admitted() {
        return !limited();
    }
}
