package io.rebalanceplanner.core;

import static org.junit.jupiter.api.Assertions.assertEquals;

import com.fasterxml.jackson.databind.JsonNode;
import java.io.IOException;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.TreeSet;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.TestFactory;

/**
 * Every case of schemas/vectors/deferral_cases.json: the Java rules keep the same departures pending and give
 * Python's assignment, held tasks and follow-up delay, with the clients in either order.
 */
class DeferralVectorsTest {
    @TestFactory
    List<DynamicTest> deferralVectors() throws IOException {
        List<DynamicTest> tests = new ArrayList<>();
        for (JsonNode c : Vectors.read("deferral_cases.json").get("cases")) {
            String name = c.get("name").asText();
            tests.add(DynamicTest.dynamicTest(name, () -> check(c, name, false)));
            tests.add(DynamicTest.dynamicTest(name + " (clients reversed)", () -> check(c, name, true)));
        }
        return tests;
    }

    private static Map<String, Deferral.Departure> departures(JsonNode node) {
        Map<String, Deferral.Departure> out = new TreeMap<>(CodePoints.ORDER);
        node.properties().forEach(e -> out.put(e.getKey(), new Deferral.Departure(e.getKey(),
                e.getValue().get("departed_at_ms").asLong(), new TreeSet<>(
                        Vectors.tasks(e.getValue().get("active"))))));
        return out;
    }

    private static void check(JsonNode c, String name, boolean reversed) {
        LiveGroup group = HighAvailabilityVectorsTest.group(c.get("group"), reversed);
        JsonNode s = c.get("settings");
        Deferral.Settings settings = new Deferral.Settings(s.get("scheduled_rebalance_max_delay_ms").asLong(),
                s.get("hold_without_caught_up_copy").asBoolean());
        Map<String, ClientTasks> previous = c.get("previous").isNull() ? null
                : HighAvailabilityVectorsTest.assignment(c.get("previous"));
        long now = c.get("now_ms").asLong();
        JsonNode expected = c.get("expected");
        Map<String, Deferral.Departure> pending = Deferral.pending(previous, group, departures(c.get("departures")),
                now, settings);
        assertEquals(departures(expected.get("pending")), pending, name);
        assertEquals(expected.get("deferred").asBoolean(), !pending.isEmpty() && previous != null, name);
        if (pending.isEmpty() || previous == null) {
            return;
        }
        List<String> pids = new ArrayList<>();
        group.clients().forEach(client -> pids.add(client.processId()));
        pids.sort(CodePoints.ORDER);
        Map<Task, Long> ends = new HashMap<>();
        c.get("group").get("changelog_end_offset_sums").properties()
                .forEach(e -> ends.put(Task.parseOrNull(e.getKey()), e.getValue().asLong()));
        LagIndex lags = new LagIndex(pids, HighAvailabilityVectorsTest.lags(c.get("lags")), Map.of(),
                c.get("configs").get("acceptable_recovery_lag").asLong());
        Deferral.Result result = Deferral.defer(previous, group, lags, ends, pending, now, settings);
        assertEquals(HighAvailabilityVectorsTest.assignment(expected.get("assignment")).toString(),
                result.assignment().assignment().toString(), name);
        assertEquals(new TreeSet<>(Vectors.tasks(expected.get("held"))), result.held(), name);
        assertEquals(expected.get("rebalance_in_ms").asLong(), result.rebalanceInMs(), name);
    }
}
