package dev.redisratelimit.client;

import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.api.Test;

/** The Cluster slot the core groups clauses by: the values of the Redis Cluster spec and CLUSTER KEYSLOT. */
class SlotsTest {

    @Test
    void crc16OfTheKeyOrItsHashTag() {
        assertThat(Slots.of("123456789")).isEqualTo(0x31C3 & 16383); // the spec's check value
        assertThat(Slots.of("foo")).isEqualTo(12182);
        assertThat(Slots.of("bar")).isEqualTo(5061);
        assertThat(Slots.of("{user1000}.following")).isEqualTo(Slots.of("user1000"));
        assertThat(Slots.of("p:sms:{1.2.3.4}:short")).isEqualTo(Slots.of("1.2.3.4"));
        assertThat(Slots.of("foo{}{bar}")).isEqualTo(Slots.of("foo{}{bar}")); // an empty tag: the whole key
        assertThat(Slots.of("foo{{bar}}zap")).isEqualTo(Slots.of("{bar"));
    }
}
