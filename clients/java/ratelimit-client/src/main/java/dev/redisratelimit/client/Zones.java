package dev.redisratelimit.client;

import java.time.DateTimeException;
import java.time.ZoneId;
import java.time.ZoneOffset;

/**
 * A {@link ZoneId} as RL.QUOTA spells it: an IANA name, or a fixed offset
 * {@code +HH:MM}. Java's own forms the module does not know ({@code Z},
 * {@code UTC+01:00}, offsets with seconds) are turned into an offset or refused.
 */
final class Zones {

    private Zones() {
    }

    static String toArgument(ZoneId zone) {
        if (zone == null) {
            throw new RateLimitArgumentException("zone", "zone is required");
        }
        if (!(zone instanceof ZoneOffset) && ZoneId.getAvailableZoneIds().contains(zone.getId())) {
            return zone.getId();
        }
        ZoneId normalized = zone.normalized();
        if (normalized instanceof ZoneOffset offset) {
            int seconds = offset.getTotalSeconds();
            if (seconds % 60 != 0) {
                throw new RateLimitArgumentException("zone", "invalid zone '" + zone.getId() + "': the module takes offsets in whole minutes (+HH:MM)");
            }
            int minutes = Math.abs(seconds) / 60;
            return String.format("%s%02d:%02d", seconds < 0 ? "-" : "+", minutes / 60, minutes % 60);
        }
        throw new RateLimitArgumentException("zone", "invalid zone '" + zone.getId() + "': expected an IANA time-zone name or a fixed offset +HH:MM");
    }

    static ZoneId parse(String zone) {
        try {
            return ZoneId.of(zone);
        } catch (DateTimeException | NullPointerException e) {
            throw new RateLimitArgumentException("zone", "invalid zone '" + zone + "': expected an IANA time-zone name or a fixed offset +HH:MM", e);
        }
    }
}
