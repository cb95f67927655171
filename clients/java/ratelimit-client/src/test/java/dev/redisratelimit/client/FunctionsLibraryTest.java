package dev.redisratelimit.client;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;

/** Backend FUNCTIONS: the argv each RL call becomes, zones as the library takes them, the jar's copy of the library. */
class FunctionsLibraryTest {


    private static List<String> argv(String command, String... args) {
        RedisCall wired = FunctionsLibrary.fcall(new RedisCall(command, List.of(args), command.startsWith("RL.ALL") ? 1 : 0));
        List<String> out = new java.util.ArrayList<>();
        out.add(wired.command());
        out.addAll(wired.args());
        assertEquals(wired.args().get(2), wired.routingKey(), "routed by the first key");
        return out;
    }

    @Test
    void everyCommandMapsToItsFunctionKeysFirst() {
        // SPEC.md's own example
        assertEquals(List.of("FCALL", "rl_all", "2", "a", "b", "*", "CHECK", "1", "5", "60000", "LEASE", "2", "3", "60000", "TOKEN", "t"),
                argv("RL.ALL", "2", "a", "b", "*", "CHECK", "1", "5", "60000", "LEASE", "2", "3", "60000", "TOKEN", "t"));
        assertEquals(List.of("FCALL", "rl_check", "1", "k", "*", "5", "1000", "COST", "2"), argv("RL.CHECK", "k", "*", "5", "1000", "COST", "2"));
        assertEquals(List.of("FCALL", "rl_dayhour", "2", "d", "h", "20", "5", "86400000", "3600000"),
                argv("RL.DAYHOUR", "d", "h", "20", "5", "86400000", "3600000"));
        assertEquals(List.of("FCALL", "rl_release", "1", "k", "*", "t1"), argv("RL.RELEASE", "k", "*", "t1"));
    }

    @Test
    void peeksGoReadOnlyRefundsThroughRlRefund() {
        assertEquals(List.of("FCALL_RO", "rl_throttlepeek"), argv("RL.THROTTLEPEEK", "k", "*", "1", "1", "1000").subList(0, 2));
        assertEquals(List.of("FCALL", "rl_refund", "1", "k", "check", "*", "5", "60000", "REFUND"), argv("RL.CHECK", "k", "*", "5", "60000", "REFUND"));
        assertEquals(List.of("FCALL", "rl_refund", "1", "k", "all"), argv("RL.ALL", "1", "k", "*", "CHECK", "1", "5", "60000", "REFUND", "DETAILS").subList(0, 5));
        assertEquals(List.of("FCALL", "rl_check"), argv("RL.CHECK", "k", "*", "5", "60000", "DEBIT").subList(0, 2));
        // a lease token spelled REFUND is a token, not the option
        assertEquals(List.of("FCALL", "rl_all"), argv("RL.ALL", "1", "k", "*", "LEASE", "1", "2", "60000", "TOKEN", "REFUND").subList(0, 2));
    }

    @Test
    void zonesFixedOffsetsPassDaylightSavingIsRefused() {
        assertEquals("+08:00", argv("RL.QUOTA", "k", "*", "Asia/Shanghai", "DAY", "20").get(5));
        assertEquals("UTC", argv("RL.QUOTAPEEK", "k", "*", "UTC", "DAY", "20").get(5));
        assertEquals("+05:45", FunctionsLibrary.zone("Asia/Kathmandu"));
        assertEquals("-03:00", FunctionsLibrary.zone("Etc/GMT+3"));
        assertEquals(List.of("QUOTA", "QUOTA", "2", "+09:00"),
                argv("RL.ALL", "2", "a", "b", "*", "LEASE", "1", "2", "60000", "TOKEN", "QUOTA", "QUOTA", "2", "Asia/Tokyo", "DAY", "100").subList(11, 15));
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> argv("RL.QUOTA", "k", "*", "Europe/Paris", "DAY", "20"));
        assertTrue(e.getMessage().contains("daylight saving") && e.getMessage().contains("Functions library"), e.getMessage());
    }

    @Test
    void theBackendSettingIsChecked() {
        assertEquals(Backend.FUNCTIONS, Backend.parse("Functions"));
        assertThrows(IllegalArgumentException.class, () -> Backend.parse("lua"));
    }

    @Test
    void theJarCarriesTheRepositoryLibraryByteForByte() throws IOException {
        Path repo = Path.of(System.getProperty("user.dir")).resolve("../../../functions/ratelimit.lua").normalize();
        try (InputStream in = FunctionsLibrary.class.getClassLoader().getResourceAsStream(FunctionsLibrary.RESOURCE)) {
            assertTrue(in != null, FunctionsLibrary.RESOURCE + " is not on the class path");
            assertArrayEquals(Files.readAllBytes(repo), in.readAllBytes());
        }
        assertTrue(FunctionsLibrary.versionOf(FunctionsLibrary.source()) > 0);
    }
}
