package io.rebalanceplanner.kafka;

import static org.junit.jupiter.api.Assertions.assertEquals;

import io.rebalanceplanner.core.KeyRevocation;
import java.nio.charset.StandardCharsets;
import java.util.Map;
import org.junit.jupiter.api.Test;

class TopicPlanSourceTest {
    private static byte[] key(String id) {
        return (KeyRevocation.TOPIC_KEY_PREFIX + id).getBytes(StandardCharsets.UTF_8);
    }

    @Test
    void revocationRecordsAreKeptWithinTheReadersBounds() {
        try (TopicPlanSource source = new TopicPlanSource(Map.of(), "plans", "test")) {
            source.keepRevocation(key("huge"), new byte[KeyRevocation.MAX_BYTES + 1]);
            assertEquals(0, source.revocations().size(), "larger than a revocation can be");
            for (int i = 0; i < 20; i++) {
                source.keepRevocation(key("k1"), new byte[] {(byte) i});
            }
            assertEquals(16, source.revocations().size(), "at most 16 records of one key");
            byte[] full = new byte[KeyRevocation.MAX_BYTES];
            int fit = (KeyRevocation.MAX_HELD_BYTES - 16) / full.length;
            for (int i = 0; i < fit + 10; i++) {
                source.keepRevocation(key("k-" + i), full);
            }
            assertEquals(16 + fit, source.revocations().size(), "no more than MAX_HELD_BYTES in all");
        }
    }
}
