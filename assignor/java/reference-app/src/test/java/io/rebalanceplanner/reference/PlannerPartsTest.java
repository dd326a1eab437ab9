package io.rebalanceplanner.reference;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** Which parts a reference-app member runs per protocol, and the properties and topics they need. */
class PlannerPartsTest {
    private static Flags flags(String... args) {
        return new Flags(args);
    }

    @Test
    void aStreamsProtocolMemberRunsTheRestoreListenerAndNoPlugin() {
        Flags f = flags("--reports-topic", "reports", "--plans-topic", "plans", "--verify-keys", "k=00");
        PlannerParts parts = PlannerParts.from(f, GroupProtocol.STREAMS);
        assertEquals(new PlannerParts(false, true), parts);
        // Only the listener's key: no task.assignor.class, no plan settings for a plugin Kafka Streams never calls.
        assertEquals(Map.of("rebalance.planner.reports.topic", "reports"), parts.properties(f, "/state"));
        assertEquals(List.of("reports"), parts.compactedTopics(f));
    }

    @Test
    void aClassicMemberWithThePluginRunsBoth() {
        Flags f = flags("--reports-topic", "reports", "--plans-topic", "plans");
        PlannerParts parts = PlannerParts.from(f, GroupProtocol.CLASSIC);
        assertEquals(new PlannerParts(true, true), parts);
        Map<String, Object> props = parts.properties(f, "/state");
        assertEquals(PlannerParts.PLUGIN, props.get("task.assignor.class"));
        assertEquals("reports", props.get("rebalance.planner.reports.topic"));
        assertEquals("plans", props.get("rebalance.planner.plans.topic"));
        // The replay floor beside the Streams state, not inside the application's folder Kafka Streams manages.
        assertEquals("/state/rebalance-planner", props.get("rebalance.planner.state.dir"));
        assertEquals(List.of("plans", "reports"), parts.compactedTopics(f));
    }

    @Test
    void withoutThePluginOrWithRestoredReportsOffNothingIsConfigured() {
        Flags classic = flags("--plugin", "false");
        assertEquals(new PlannerParts(false, false), PlannerParts.from(classic, GroupProtocol.CLASSIC));
        Flags off = flags("--restored-reports", "false");
        PlannerParts streams = PlannerParts.from(off, GroupProtocol.STREAMS);
        assertEquals(new PlannerParts(false, false), streams);
        assertEquals(Map.of(), streams.properties(off, "/state"));
        assertEquals(List.of(), streams.compactedTopics(off));
        // A classic member without the plugin may still publish what it restored when asked to.
        assertEquals(new PlannerParts(false, true),
                PlannerParts.from(flags("--plugin", "false", "--restored-reports", "true"), GroupProtocol.CLASSIC));
    }
}
