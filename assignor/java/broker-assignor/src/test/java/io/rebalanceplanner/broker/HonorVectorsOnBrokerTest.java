package io.rebalanceplanner.broker;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.rebalanceplanner.core.PlanVerifier;
import io.rebalanceplanner.core.Task;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentLinkedQueue;
import org.apache.kafka.coordinator.group.api.streams.assignor.GroupAssignment;
import org.apache.kafka.coordinator.group.streams.assignor.GroupSpecImpl;
import org.apache.kafka.coordinator.group.streams.assignor.StickyTaskAssignor;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.TestFactory;

/**
 * schemas/vectors/honor_cases.json through the broker assignor: each case's group becomes a GroupSpec (a member per
 * unit of capacity, lags as heartbeat offsets and end offsets), its target a signed plan. The per-process result
 * must be the vector's (warm-ups arrive as standbys); a case whose target does not fit must get Kafka's sticky
 * assignment with the vector's reason. Cases the streams protocol cannot express are skipped, and counted.
 */
class HonorVectorsOnBrokerTest {
    static final long NOW = PlanCacheTest.NOW;
    static final String GROUP = "vector-group";

    @TestFactory
    List<DynamicTest> honorVectorsThroughTheBrokerAssignor() throws IOException {
        JsonNode root = new ObjectMapper().readTree(Paths.get(System.getProperty("rebalance.planner.vectors.dir",
                "../../../schemas/vectors"), "honor_cases.json").toFile());
        List<DynamicTest> tests = new ArrayList<>();
        int total = 0;
        for (JsonNode c : root.get("cases")) {
            total++;
            if (expressible(c)) {
                tests.add(DynamicTest.dynamicTest(c.get("name").asText(), () -> check(c)));
            }
        }
        assertTrue(tests.size() * 2 >= total, "at least half the honor vectors apply: " + tests.size() + "/" + total);
        return tests;
    }

    /**
     * The streams protocol numbers a subtopology's tasks 0..n-1 and makes a subtopology stateful or not as a whole;
     * a running active is the only source of lag -2.
     */
    static boolean expressible(JsonNode c) {
        JsonNode g = c.get("group");
        Map<Long, TreeSet<Long>> stateful = bySubtopology(g.get("stateful_tasks"));
        Map<Long, TreeSet<Long>> stateless = bySubtopology(g.get("stateless_tasks"));
        for (Map<Long, TreeSet<Long>> m : List.of(stateful, stateless)) {
            for (Map.Entry<Long, TreeSet<Long>> e : m.entrySet()) {
                if (e.getValue().last() != e.getValue().size() - 1) {
                    return false;
                }
            }
        }
        for (Long sub : stateful.keySet()) {
            if (stateless.containsKey(sub)) {
                return false;
            }
        }
        for (JsonNode client : g.get("clients")) {
            String pid = client.get("process_id").asText();
            Set<String> active = new HashSet<>();
            client.get("previous_active").forEach(t -> active.add(t.asText()));
            JsonNode lags = c.get("lags").get(pid);
            for (JsonNode t : g.get("stateful_tasks")) {
                long lag = lags != null && lags.has(t.asText()) ? lags.get(t.asText()).asLong() : Long.MIN_VALUE;
                if ((lag == -2) != active.contains(t.asText())) {
                    return false;
                }
            }
        }
        return true;
    }

    private static Map<Long, TreeSet<Long>> bySubtopology(JsonNode tasks) {
        Map<Long, TreeSet<Long>> out = new TreeMap<>();
        for (JsonNode t : tasks) {
            Task task = Task.parseOrNull(t.asText());
            out.computeIfAbsent(task.subtopology(), k -> new TreeSet<>()).add(task.partition());
        }
        return out;
    }

    /** The case's group as a GroupSpec plus its topology. */
    static Map.Entry<GroupSpecImpl, Topology> spec(JsonNode c) {
        JsonNode g = c.get("group");
        Map<String, Integer> partitions = new HashMap<>();
        Set<String> statefulSubs = new HashSet<>();
        Map<String, Long> ends = new HashMap<>();
        for (String role : List.of("stateful_tasks", "stateless_tasks")) {
            for (JsonNode t : g.get(role)) {
                Task task = Task.parseOrNull(t.asText());
                String sub = String.valueOf(task.subtopology());
                partitions.merge(sub, (int) task.partition() + 1, Math::max);
                if (role.equals("stateful_tasks")) {
                    statefulSubs.add(sub);
                    ends.put(t.asText(), 0L);
                }
            }
        }
        JsonNode lags = c.get("lags");
        lags.properties().forEach(client -> client.getValue().properties().forEach(l -> {
            if (l.getValue().asLong() >= 0) {
                ends.merge(l.getKey(), l.getValue().asLong(), Math::max);
            }
        }));
        Specs specs = new Specs().standbys(c.get("configs").get("num_standby_replicas").asInt());
        for (JsonNode client : g.get("clients")) {
            String pid = client.get("process_id").asText();
            int capacity = client.get("capacity").asInt();
            List<Specs.Member> members = new ArrayList<>();
            for (int i = 0; i < capacity; i++) {
                members.add(specs.member(pid + "-m" + i, pid));
            }
            int next = 0;
            for (JsonNode t : client.get("previous_active")) {
                members.get(next++ % capacity).active(t.asText());
            }
            for (JsonNode t : client.get("previous_standby")) {
                members.get(next++ % capacity).standby(t.asText());
            }
            JsonNode mine = lags.get(pid);
            for (Map.Entry<String, Long> end : ends.entrySet()) {
                members.get(0).end(end.getKey(), end.getValue());
                long lag = mine != null && mine.has(end.getKey()) ? mine.get(end.getKey()).asLong() : end.getValue();
                if (lag == -3) {
                    members.get(0).offset(end.getKey(), -1);
                } else if (lag >= 0 && lag < end.getValue()) {
                    members.get(0).offset(end.getKey(), end.getValue() - lag);
                }
            }
        }
        return Map.entry(specs.build(), new Topology(partitions, statefulSubs));
    }

    private static void check(JsonNode c) {
        Signer signer = new Signer();
        PlanCache cache = new PlanCache(new PlanVerifier(signer.verifyKeys(), 60_000), 10);
        JsonNode cfg = c.get("configs");
        Map<String, Object> configs = Signer.configs(cfg.get("acceptable_recovery_lag").asLong(),
                cfg.get("max_warmup_replicas").asLong(), cfg.get("num_standby_replicas").asLong());
        Map<String, Map<String, List<String>>> target = new TreeMap<>();
        c.get("target").properties().forEach(e -> {
            Map<String, List<String>> roles = new HashMap<>();
            for (String role : List.of("active", "standby")) {
                List<String> ids = new ArrayList<>();
                e.getValue().get(role).forEach(t -> ids.add(t.asText()));
                roles.put(role, ids);
            }
            target.put(e.getKey(), roles);
        });
        List<String> order = new ArrayList<>();
        c.get("move_order").forEach(t -> order.add(t.asText()));
        cache.offer(GROUP.getBytes(StandardCharsets.UTF_8),
                signer.plan(GROUP, "plan-v", NOW, NOW + 3_600_000, configs, target, order), NOW);
        cache.publish(true, null);
        ConcurrentLinkedQueue<Decision> decisions = new ConcurrentLinkedQueue<>();
        PlanFollowingTaskAssignor assignor = new PlanFollowingTaskAssignor(
                BrokerAssignorSettings.from(Map.of()), cache, decisions::add, () -> NOW);
        Map.Entry<GroupSpecImpl, Topology> spec = spec(c);
        GroupAssignment got = assignor.assign(spec.getKey(), spec.getValue());
        Decision d = decisions.poll();
        JsonNode expected = c.get("expected");
        if (expected.has("fallback")) {
            assertEquals(expected.get("fallback").asText(), d.reasonCode(), d.fallbackReason());
            assertEquals(new StickyTaskAssignor().assign(spec.getKey(), spec.getValue()), got);
            return;
        }
        assertNull(d.fallbackReason());
        Map<String, Map<String, Set<String>>> want = new TreeMap<>();
        expected.get("assignment").properties().forEach(e -> {
            Set<String> active = new TreeSet<>();
            Set<String> standby = new TreeSet<>();
            e.getValue().get("active").forEach(t -> active.add(t.asText()));
            e.getValue().get("standby").forEach(t -> standby.add(t.asText()));
            e.getValue().get("warmup").forEach(t -> standby.add(t.asText()));
            want.put(e.getKey(), Map.of("active", active, "standby", standby));
        });
        assertEquals(want, Specs.byProcess(spec.getKey(), got));
        assertEquals(expected.get("followup_rebalance").asBoolean(), d.followupNeeded());
    }
}
