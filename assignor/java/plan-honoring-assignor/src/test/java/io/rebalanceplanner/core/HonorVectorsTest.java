package io.rebalanceplanner.core;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;

import com.fasterxml.jackson.databind.JsonNode;
import java.io.IOException;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.TestFactory;

/** Every case of schemas/vectors/honor_cases.json: fit check, then the honored assignment, tie-breaks included. */
class HonorVectorsTest {
    @TestFactory
    List<DynamicTest> honorVectors() throws IOException {
        JsonNode root = Vectors.read("honor_cases.json");
        List<DynamicTest> tests = new ArrayList<>();
        for (JsonNode c : root.get("cases")) {
            String name = c.get("name").asText();
            tests.add(DynamicTest.dynamicTest(name, () -> check(c, name)));
        }
        return tests;
    }

    private static void check(JsonNode c, String name) {
        JsonNode cfg = c.get("configs");
        PlanConfigs configs = new PlanConfigs(cfg.get("acceptable_recovery_lag").asLong(),
                cfg.get("max_warmup_replicas").asInt(), cfg.get("num_standby_replicas").asInt(),
                cfg.get("probing_rebalance_interval_ms").asLong());
        JsonNode g = c.get("group");
        List<LiveGroup.Client> clients = new ArrayList<>();
        List<String> pids = new ArrayList<>();
        for (JsonNode client : g.get("clients")) {
            String pid = client.get("process_id").asText();
            pids.add(pid);
            clients.add(new LiveGroup.Client(pid, client.get("capacity").asInt(),
                    Vectors.tasks(client.get("previous_active")), Vectors.tasks(client.get("previous_standby"))));
        }
        pids.sort(CodePoints.ORDER);
        LiveGroup group = new LiveGroup(clients, Vectors.tasks(g.get("stateful_tasks")),
                Vectors.tasks(g.get("stateless_tasks")));
        Map<String, Map<Task, Long>> lags = new HashMap<>();
        for (Iterator<Map.Entry<String, JsonNode>> it = c.get("lags").properties().iterator(); it.hasNext();) {
            Map.Entry<String, JsonNode> e = it.next();
            Map<Task, Long> client = new HashMap<>();
            for (Iterator<Map.Entry<String, JsonNode>> t = e.getValue().properties().iterator(); t.hasNext();) {
                Map.Entry<String, JsonNode> lag = t.next();
                client.put(Task.parseOrNull(lag.getKey()), lag.getValue().asLong());
            }
            lags.put(e.getKey(), client);
        }
        Map<String, ClientTasks> target = new TreeMap<>(CodePoints.ORDER);
        for (Iterator<Map.Entry<String, JsonNode>> it = c.get("target").properties().iterator(); it.hasNext();) {
            Map.Entry<String, JsonNode> e = it.next();
            target.put(e.getKey(), new ClientTasks(Vectors.tasks(e.getValue().get("active")),
                    Vectors.tasks(e.getValue().get("standby")), Set.of()));
        }
        List<Task> order = new ArrayList<>();
        for (JsonNode t : c.get("move_order")) {
            order.add(Task.parseOrNull(t.asText()));
        }
        JsonNode expected = c.get("expected");
        FitCheck.Unfit unfit = FitCheck.unfitReason(target, group, configs);
        if (expected.has("fallback")) {
            assertNotNull(unfit, name + ": expected fallback " + expected.get("fallback").asText());
            assertEquals(expected.get("fallback").asText(), unfit.code(), name + ": " + unfit);
            return;
        }
        assertNull(unfit, name + ": the target should fit");
        LagIndex index = new LagIndex(pids, lags, Map.of(), configs.acceptableRecoveryLag());
        LiveAssignment result = Honor.honorTarget(FitCheck.targetFor(target, group), group, configs, order, index);
        Map<String, ClientTasks> want = new TreeMap<>(CodePoints.ORDER);
        for (Iterator<Map.Entry<String, JsonNode>> it = expected.get("assignment").properties().iterator(); it.hasNext();) {
            Map.Entry<String, JsonNode> e = it.next();
            want.put(e.getKey(), new ClientTasks(Vectors.tasks(e.getValue().get("active")),
                    Vectors.tasks(e.getValue().get("standby")), Vectors.tasks(e.getValue().get("warmup"))));
        }
        assertEquals(want.toString(), result.assignment().toString(), name);
        assertEquals(expected.get("followup_rebalance").asBoolean(), result.followupRebalance(), name);
    }
}
