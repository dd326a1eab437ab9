package io.rebalanceplanner.core;

import static org.junit.jupiter.api.Assertions.assertEquals;

import com.fasterxml.jackson.databind.JsonNode;
import java.io.IOException;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.TestFactory;

/**
 * Every case of schemas/vectors/high_availability_cases.json: the Java port of {@code assign_high_availability}
 * gives Python's assignment and follow-up flag, tie-breaks included. It reads only the dense {@code lags}, never
 * the group's offset sums or changelog end offsets, because the plugin only ever gets lags.
 */
class HighAvailabilityVectorsTest {
    @TestFactory
    List<DynamicTest> highAvailabilityVectors() throws IOException {
        JsonNode root = Vectors.read("high_availability_cases.json");
        List<DynamicTest> tests = new ArrayList<>();
        for (JsonNode c : root.get("cases")) {
            String name = c.get("name").asText();
            tests.add(DynamicTest.dynamicTest(name, () -> check(c, name, false)));
        }
        return tests;
    }

    /** The same cases with the clients listed in reverse: the output must not depend on input order. */
    @TestFactory
    List<DynamicTest> clientOrderDoesNotMatter() throws IOException {
        JsonNode root = Vectors.read("high_availability_cases.json");
        List<DynamicTest> tests = new ArrayList<>();
        for (JsonNode c : root.get("cases")) {
            String name = c.get("name").asText();
            tests.add(DynamicTest.dynamicTest(name + " (clients reversed)", () -> check(c, name, true)));
        }
        return tests;
    }

    static PlanConfigs configs(JsonNode cfg) {
        List<String> tags = new ArrayList<>();
        for (JsonNode t : cfg.get("rack_aware_assignment_tags")) {
            tags.add(t.asText());
        }
        return new PlanConfigs(cfg.get("acceptable_recovery_lag").asLong(), cfg.get("max_warmup_replicas").asInt(),
                cfg.get("num_standby_replicas").asInt(), cfg.get("probing_rebalance_interval_ms").asLong(), tags);
    }

    static LiveGroup group(JsonNode g, boolean reversed) {
        List<LiveGroup.Client> clients = new ArrayList<>();
        for (JsonNode client : g.get("clients")) {
            Map<String, String> tags = new HashMap<>();
            client.get("client_tags").properties().forEach(e -> tags.put(e.getKey(), e.getValue().asText()));
            clients.add(new LiveGroup.Client(client.get("process_id").asText(), client.get("capacity").asInt(),
                    Vectors.tasks(client.get("previous_active")), Vectors.tasks(client.get("previous_standby")),
                    tags));
        }
        if (reversed) {
            Collections.reverse(clients);
        }
        return new LiveGroup(clients, Vectors.tasks(g.get("stateful_tasks")), Vectors.tasks(g.get("stateless_tasks")));
    }

    static Map<String, Map<Task, Long>> lags(JsonNode lags) {
        Map<String, Map<Task, Long>> out = new HashMap<>();
        lags.properties().forEach(e -> {
            Map<Task, Long> client = new HashMap<>();
            e.getValue().properties().forEach(t -> client.put(Task.parseOrNull(t.getKey()), t.getValue().asLong()));
            out.put(e.getKey(), client);
        });
        return out;
    }

    static Map<String, ClientTasks> assignment(JsonNode assignment) {
        Map<String, ClientTasks> out = new TreeMap<>(CodePoints.ORDER);
        assignment.properties().forEach(e -> out.put(e.getKey(), new ClientTasks(Vectors.tasks(e.getValue().get("active")),
                Vectors.tasks(e.getValue().get("standby")), Vectors.tasks(e.getValue().get("warmup")))));
        return out;
    }

    private static void check(JsonNode c, String name, boolean reversed) {
        LiveAssignment result = HighAvailability.assign(group(c.get("group"), reversed),
                configs(c.get("configs")), lags(c.get("lags")));
        JsonNode expected = c.get("expected");
        assertEquals(assignment(expected.get("assignment")).toString(), result.assignment().toString(), name);
        assertEquals(expected.get("followup_rebalance").asBoolean(), result.followupRebalance(), name);
    }
}
