package dev.redisratelimit.example;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * {@link ClusterServicesTest}'s checks with RL_BACKEND=functions on three
 * primaries without the module (endpoint 5 in a zone of one offset: the
 * library takes no zone with daylight saving), and the library loaded on
 * every primary at start-up.
 */
class FunctionsClusterServicesTest extends ClusterServicesTest {

    @Override
    Backend backend() {
        return Backend.FUNCTIONS;
    }

    // rl_version on each primary once both instances started, before any request (run after the superclass's start)
    private final List<String> versionsAtStart = new ArrayList<>();

    @BeforeAll
    void readVersionsBeforeAnyRequest() throws Exception {
        for (var n : cluster.nodes) {
            versionsAtStart.add(n.cli("FCALL", "rl_version", "0").trim());
        }
    }

    @Test
    void theLibraryIsOnEveryPrimaryFromStartUp() {
        assertThat(versionsAtStart).hasSize(3).allMatch(v -> v.matches("\\d+"), "a version number");
    }
}
