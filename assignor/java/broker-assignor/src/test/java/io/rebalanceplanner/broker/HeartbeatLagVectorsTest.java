package io.rebalanceplanner.broker;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.rebalanceplanner.core.LagIndex;
import java.io.IOException;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.TestFactory;

/**
 * schemas/vectors/heartbeat_lags.json through the assignor's lag rule: observe (Python) triggers a step when it reads
 * a warm-up as caught up, so the assignor must read the same heartbeat values alike (null there: unknown here).
 */
class HeartbeatLagVectorsTest {
    @TestFactory
    List<DynamicTest> heartbeatLagVectors() throws IOException {
        JsonNode root = new ObjectMapper().readTree(Paths.get(System.getProperty("rebalance.planner.vectors.dir",
                "../../../schemas/vectors"), "heartbeat_lags.json").toFile());
        List<DynamicTest> tests = new ArrayList<>();
        for (JsonNode c : root.get("cases")) {
            tests.add(DynamicTest.dynamicTest(c.get("name").asText(), () -> {
                long got = GroupView.heartbeatLag(c.get("offset_sum").asLong(), c.get("end_offset_sum").asLong());
                JsonNode lag = c.get("lag");
                assertEquals(lag.isNull() ? LagIndex.UNKNOWN_OFFSET_SUM : lag.asLong(), got);
            }));
        }
        assertTrue(tests.size() >= 10, "the vector file lists its cases");
        return tests;
    }
}
