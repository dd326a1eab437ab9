package io.rebalanceplanner.kafka;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.nio.file.Path;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class RevokedKeysFileTest {
    @Test
    void theMostKeyIdsItKeepsReadBackAndNoMoreAreWritten(@TempDir Path dir) throws Exception {
        RevokedKeysFile file = RevokedKeysFile.of(PlannerSettings.from(Map.of("application.id", "app",
                "rebalance.planner.state.dir", dir.toString())));
        Set<String> longest = new TreeSet<>();
        for (int i = 0; i < RevokedKeysFile.MAX_KEYS; i++) {
            longest.add(String.format("%04d", i) + "k".repeat(60));
        }
        file.keep(Set.of(), longest);
        assertEquals(longest, file.read()); // what it may write, it can read again
        Set<String> more = new TreeSet<>(longest);
        more.add("one-more");
        file.keep(longest, more);
        assertEquals(longest, file.read());
    }
}
