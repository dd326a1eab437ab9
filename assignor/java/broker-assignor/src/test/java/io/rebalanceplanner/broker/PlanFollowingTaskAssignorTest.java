package io.rebalanceplanner.broker;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.rebalanceplanner.core.CanonicalJson;
import io.rebalanceplanner.core.PlanVerifier;
import io.rebalanceplanner.core.StrictJson;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.kafka.coordinator.group.api.streams.assignor.GroupAssignment;
import org.apache.kafka.coordinator.group.streams.assignor.GroupSpecImpl;
import org.apache.kafka.coordinator.group.streams.assignor.StickyTaskAssignor;
import org.junit.jupiter.api.Test;

class PlanFollowingTaskAssignorTest {
    static final long NOW = PlanCacheTest.NOW;
    static final long HOUR = PlanCacheTest.HOUR;

    private final Signer signer = new Signer();
    private final PlanCache cache = new PlanCache(new PlanVerifier(signer.verifyKeys(), 60_000), 100);
    private final ConcurrentLinkedQueue<Decision> decisions = new ConcurrentLinkedQueue<>();
    private final AtomicLong clock = new AtomicLong(NOW);
    private final PlanFollowingTaskAssignor assignor = new PlanFollowingTaskAssignor(
            BrokerAssignorSettings.from(Map.of()), cache, decisions::add, clock::get);
    private final Topology fourStateful = new Topology(Map.of("0", 4), Set.of("0"));

    private void publish(String group, Map<String, Map<String, List<String>>> target, long maxWarmups,
            long standbys, List<String> order) {
        cache.offer(group.getBytes(StandardCharsets.UTF_8), signer.plan(group, "plan-" + group, NOW, NOW + HOUR,
                Signer.configs(100, maxWarmups, standbys), target, order), NOW);
        cache.publish(true, null);
    }

    /** p1 runs all four tasks; the plan moves 0_2 and 0_3 to the new p2. */
    private void scaleOutPlan(long maxWarmups) {
        publish("g", Map.of("p1", Map.of("active", List.of("0_0", "0_1")),
                "p2", Map.of("active", List.of("0_2", "0_3"))), maxWarmups, 0, List.of("0_2", "0_3"));
    }

    private Specs scaleOutGroup() {
        Specs specs = new Specs();
        specs.member("m1", "p1").active("0_0").active("0_1").active("0_2").active("0_3");
        specs.member("m2", "p2");
        return specs;
    }

    private Map<String, Map<String, Set<String>>> run(GroupSpecImpl spec, Topology topology) {
        return Specs.byProcess(spec, assignor.assign(spec, topology));
    }

    @Test
    void memberWithoutStateGetsWarmupStandbysNotTheActive() {
        scaleOutPlan(2);
        Map<String, Map<String, Set<String>>> got = run(scaleOutGroup().build(), fourStateful);
        assertEquals(Set.of("0_0", "0_1", "0_2", "0_3"), got.get("p1").get("active"));
        assertEquals(Set.of("0_2", "0_3"), got.get("p2").get("standby"));
        Decision d = decisions.poll();
        assertEquals("plan-g", d.planId());
        assertEquals("g", d.groupId());
        assertTrue(d.followupNeeded());
        assertEquals(2, d.warmups());
    }

    @Test
    void warmupsStayWithinTheBudget() {
        scaleOutPlan(1);
        Map<String, Map<String, Set<String>>> got = run(scaleOutGroup().build(), fourStateful);
        assertEquals(Set.of("0_2"), got.get("p2").get("standby"), "the first in move order, one at a time");
        assertEquals(1, decisions.poll().warmups());
    }

    @Test
    void caughtUpMemberByHeartbeatOffsetsTakesTheActive() {
        scaleOutPlan(2);
        Specs specs = scaleOutGroup();
        specs.member("m2", "p2").standby("0_2").standby("0_3").offset("0_2", 950).end("0_2", 1000)
                .offset("0_3", 10).end("0_3", 1000);
        Map<String, Map<String, Set<String>>> got = run(specs.build(), fourStateful);
        assertEquals(Set.of("0_2"), got.get("p2").get("active"), "lag 50 <= 100: caught up");
        assertEquals(Set.of("0_3"), got.get("p2").get("standby"), "lag 990: still warming up");
        assertEquals(Set.of("0_0", "0_1", "0_3"), got.get("p1").get("active"));
    }

    @Test
    void warmupReportedAheadOfItsEndIsCaughtUp() {
        // Kafka Streams 4.4 sends offset sums as next offsets (last + 1) and end sums as last offsets: a warm-up that
        // read its whole changelog reports one more than the end. Seen live (docs/broker-assignor.md).
        scaleOutPlan(2);
        Specs specs = scaleOutGroup();
        specs.member("m2", "p2").standby("0_2").standby("0_3").offset("0_2", 4_933).end("0_2", 4_932)
                .offset("0_3", 5_200).end("0_3", 5_000);
        Map<String, Map<String, Set<String>>> got = run(specs.build(), fourStateful);
        assertEquals(Set.of("0_2", "0_3"), got.get("p2").get("active"));
        assertEquals(Set.of("0_0", "0_1"), got.get("p1").get("active"));
        assertEquals(false, decisions.poll().followupNeeded(), "the target reached in this step");
    }

    @Test
    void unknownEndOffsetIsNeverCaughtUp() {
        scaleOutPlan(2);
        Specs specs = scaleOutGroup();
        specs.member("m2", "p2").standby("0_2").offset("0_2", 1000).end("0_2", Long.MAX_VALUE);
        Map<String, Map<String, Set<String>>> got = run(specs.build(), fourStateful);
        assertEquals(Set.of(), got.get("p2").get("active"));
        assertTrue(got.get("p2").get("standby").contains("0_2"));
    }

    @Test
    void endOffsetReportedByAnotherMemberCounts() {
        scaleOutPlan(2);
        Specs specs = scaleOutGroup();
        specs.member("m3", "p3").standby("0_2").end("0_2", 1000);
        specs.member("m2", "p2").offset("0_2", 990);
        publish("g", Map.of("p1", Map.of("active", List.of("0_0", "0_1")),
                "p2", Map.of("active", List.of("0_2", "0_3")), "p3", Map.of()), 2, 0, List.of("0_2", "0_3"));
        Map<String, Map<String, Set<String>>> got = run(specs.build(), fourStateful);
        assertEquals(Set.of("0_2"), got.get("p2").get("active"));
    }

    @Test
    void caughtUpStandbyIsKeptUntilItsReplacementCatchesUp() {
        // K1: p2's caught-up standby of 0_0 moves to p3 in the plan; p2 keeps it while p3 warms up beside it.
        publish("g", Map.of("p1", Map.of("active", List.of("0_0")), "p2", Map.of(),
                "p3", Map.of("standby", List.of("0_0"))), 2, 1, List.of());
        Specs specs = new Specs().standbys(1);
        specs.member("m1", "p1").active("0_0");
        specs.member("m2", "p2").standby("0_0").offset("0_0", 1000).end("0_0", 1000);
        specs.member("m3", "p3");
        Map<String, Map<String, Set<String>>> got = run(specs.build(), new Topology(Map.of("0", 1), Set.of("0")));
        assertEquals(Set.of("0_0"), got.get("p1").get("active"));
        assertEquals(Set.of("0_0"), got.get("p2").get("standby"));
        assertEquals(Set.of("0_0"), got.get("p3").get("standby"));
        assertTrue(decisions.poll().followupNeeded());
    }

    @Test
    void tasksOfAProcessSpreadOverItsMembersStickily() {
        publish("g", Map.of("p1", Map.of("active", List.of("0_0", "0_1", "0_2", "0_3"))), 2, 0, List.of());
        Specs specs = new Specs();
        specs.member("a", "p1").active("0_3");
        specs.member("b", "p1");
        GroupSpecImpl spec = specs.build();
        GroupAssignment got = assignor.assign(spec, fourStateful);
        Set<Integer> a = got.members().get("a").activeTasks().get("0");
        Set<Integer> b = got.members().get("b").activeTasks().get("0");
        assertTrue(a.contains(3), "the member running 0_3 keeps it: " + a);
        assertEquals(2, a.size());
        assertEquals(2, b.size());
    }

    @Test
    void groupWithoutAPlanGetsExactlyKafkasSticky() {
        cache.publish(true, null);
        GroupSpecImpl spec = scaleOutGroup().build();
        assertEquals(new StickyTaskAssignor().assign(spec, fourStateful), assignor.assign(spec, fourStateful));
        Decision d = decisions.poll();
        assertEquals("no_plan", d.reasonCode());
        assertEquals("process:p1", d.key());
        assertEquals(1, assignor.metrics().fallbacks("no_plan"));
        assertEquals(0, assignor.metrics().getPlansHonored());
    }

    @Test
    void expiredPlanFallsBackToStickyWithTheReason() {
        scaleOutPlan(2);
        clock.set(NOW + HOUR + 1);
        GroupSpecImpl spec = scaleOutGroup().build();
        assertEquals(new StickyTaskAssignor().assign(spec, fourStateful), assignor.assign(spec, fourStateful));
        Decision d = decisions.poll();
        assertEquals("expired", d.reasonCode());
        assertEquals("g", d.groupId());
        assertEquals(1, assignor.metrics().fallbacks("expired"));
    }

    /** The scale-out plan's record with one signed field changed: its signature no longer verifies. */
    private byte[] tampered(long sequence) {
        String record = new String(signer.plan("g", "plan-forged", sequence, sequence + HOUR,
                Signer.configs(100, 2, 0), Map.of("p1", Map.of("active", List.of("0_0", "0_1", "0_2", "0_3"))),
                List.of()), StandardCharsets.UTF_8);
        return record.replace("\"approved_by\":\"alice\"", "\"approved_by\":\"mallory\"")
                .getBytes(StandardCharsets.UTF_8);
    }

    private void offer(byte[] record, long at) {
        cache.offer("g".getBytes(StandardCharsets.UTF_8), record, at);
        cache.publish(true, null);
    }

    @Test
    void tamperedNewestRecordLeavesTheVerifiedPlanHonoredAndIsReported() {
        scaleOutPlan(2);
        offer(tampered(NOW + 10), NOW + 10);
        Map<String, Map<String, Set<String>>> got = run(scaleOutGroup().build(), fourStateful);
        assertEquals(Set.of("0_2", "0_3"), got.get("p2").get("standby"), "the verified plan's first step");
        Decision d = decisions.poll();
        assertEquals("plan-g", d.planId());
        assertTrue(d.rejectedRecord().startsWith("bad_signature: "), d.rejectedRecord());
    }

    @Test
    void keptPlanThatNoLongerFitsReportsTheRefusedNewestRecordAsThePluginDoes() {
        scaleOutPlan(2);
        offer(tampered(NOW + 10), NOW + 10);
        Specs specs = scaleOutGroup();
        specs.member("m9", "p9");
        GroupSpecImpl spec = specs.build();
        assertEquals(new StickyTaskAssignor().assign(spec, fourStateful), assignor.assign(spec, fourStateful));
        Decision d = decisions.poll();
        assertEquals("bad_signature", d.reasonCode(), d.fallbackReason());
        assertEquals("g", d.groupId());
    }

    @Test
    void expiredPlanWithARefusedNewerRecordReportsTheRefusedRecord() {
        scaleOutPlan(2);
        offer(tampered(NOW + 10), NOW + 10);
        clock.set(NOW + HOUR + 1);
        GroupSpecImpl spec = scaleOutGroup().build();
        assertEquals(new StickyTaskAssignor().assign(spec, fourStateful), assignor.assign(spec, fourStateful));
        assertEquals("bad_signature", decisions.poll().reasonCode());
    }

    @Test
    void withdrawnPlanStaysMatchedByItsProcessIdsAndSaysWithdrawn() {
        scaleOutPlan(2);
        offer(signer.withdrawal("g", "plan-g", NOW + 10), NOW + 10);
        GroupSpecImpl spec = scaleOutGroup().build();
        assertEquals(new StickyTaskAssignor().assign(spec, fourStateful), assignor.assign(spec, fourStateful));
        Decision d = decisions.poll();
        assertEquals("withdrawn", d.reasonCode());
        assertEquals("g", d.groupId());
    }

    @Test
    void replayAfterAWithdrawalFallsBackAsReplayed() {
        scaleOutPlan(2);
        byte[] honored = signer.plan("g", "plan-g", NOW, NOW + HOUR, Signer.configs(100, 2, 0),
                Map.of("p1", Map.of("active", List.of("0_0", "0_1")), "p2", Map.of("active", List.of("0_2", "0_3"))),
                List.of("0_2", "0_3"));
        offer(signer.withdrawal("g", "plan-g", NOW + 10), NOW + 10);
        offer(honored, NOW + 20); // the same signed record again: below the withdrawal's sequence
        GroupSpecImpl spec = scaleOutGroup().build();
        assertEquals(new StickyTaskAssignor().assign(spec, fourStateful), assignor.assign(spec, fourStateful));
        Decision d = decisions.poll();
        assertEquals("replayed", d.reasonCode(), d.fallbackReason());
        assertEquals("g", d.groupId());
        assertEquals(1, assignor.metrics().fallbacks("replayed"));
    }

    @Test
    void livePlanOfAnotherGroupWinsOverAWithdrawnOneNamingTheSameProcess() {
        scaleOutPlan(2);
        offer(signer.withdrawal("g", "plan-g", NOW + 10), NOW + 10);
        publish("h", Map.of("p1", Map.of("active", List.of("0_0", "0_1")),
                "p2", Map.of("active", List.of("0_2", "0_3"))), 2, 0, List.of("0_2", "0_3"));
        assignor.assign(scaleOutGroup().build(), fourStateful);
        Decision d = decisions.poll();
        assertEquals("plan-h", d.planId());
    }

    @Test
    void planThatDoesNotKnowAMemberFallsBackToSticky() {
        scaleOutPlan(2);
        Specs specs = scaleOutGroup();
        specs.member("m9", "p9");
        GroupSpecImpl spec = specs.build();
        assertEquals(new StickyTaskAssignor().assign(spec, fourStateful), assignor.assign(spec, fourStateful));
        assertEquals("unknown_instances", decisions.poll().reasonCode());
    }

    @Test
    void plansNotYetReadGiveStickyAsUnreadable() {
        PlanCache empty = new PlanCache(new PlanVerifier(signer.verifyKeys(), 60_000), 10);
        PlanFollowingTaskAssignor cold = new PlanFollowingTaskAssignor(BrokerAssignorSettings.from(Map.of()), empty,
                decisions::add, clock::get);
        GroupSpecImpl spec = scaleOutGroup().build();
        assertEquals(new StickyTaskAssignor().assign(spec, fourStateful), cold.assign(spec, fourStateful));
        assertEquals("plans_unreadable", decisions.poll().reasonCode());
    }

    @Test
    void misconfiguredAssignorGivesStickyAndStartsNothing() {
        PlanFollowingTaskAssignor broker = new PlanFollowingTaskAssignor();
        broker.configure(Map.of(BrokerAssignorSettings.VERIFY_KEYS, "k=not-hex"));
        GroupSpecImpl spec = scaleOutGroup().build();
        assertEquals(new StickyTaskAssignor().assign(spec, fourStateful), broker.assign(spec, fourStateful));
        assertEquals(1, broker.metrics().fallbacks("invalid_config"));
        assertTrue(broker.metrics().getLastFallbackReason().contains(BrokerAssignorSettings.VERIFY_KEYS));
        broker.close();
    }

    @Test
    void decisionRecordIsStrictJsonWithThePlanAndGroup() throws Exception {
        scaleOutPlan(2);
        assignor.assign(scaleOutGroup().build(), fourStateful);
        Decision d = decisions.poll();
        @SuppressWarnings("unchecked")
        Map<String, Object> json = (Map<String, Object>) StrictJson.parse(d.json(PlanFollowingTaskAssignor.NAME));
        assertEquals("plan", json.get("outcome"));
        assertEquals("plan-g", json.get("plan_id"));
        assertEquals("g", json.get("group_id"));
        assertEquals(List.of("p1", "p2"), json.get("process_ids"));
        assertNull(json.get("fallback_reason"));
        assertEquals(NOW, json.get("decided_at"));
        assertNotNull(CanonicalJson.string(json));
    }

    @Test
    void concurrentAssignmentsOfManyGroupsGiveTheSameResultsAsOneAtATime() throws Exception {
        int groups = 12;
        List<GroupSpecImpl> specs = new ArrayList<>();
        for (int g = 0; g < groups; g++) {
            publish("g" + g, Map.of("a" + g, Map.of("active", List.of("0_0", "0_1")),
                    "b" + g, Map.of("active", List.of("0_2", "0_3"))), 2, 0, List.of("0_2", "0_3"));
            Specs s = new Specs();
            s.member("ma" + g, "a" + g).active("0_0").active("0_1").active("0_2").active("0_3");
            s.member("mb" + g, "b" + g).standby("0_2").offset("0_2", 1000 - g).end("0_2", 1000);
            specs.add(s.build());
        }
        List<GroupAssignment> expected = new ArrayList<>();
        for (GroupSpecImpl s : specs) {
            expected.add(assignor.assign(s, fourStateful));
        }
        java.util.concurrent.ExecutorService pool = java.util.concurrent.Executors.newFixedThreadPool(8);
        try {
            List<java.util.concurrent.Future<Boolean>> results = new ArrayList<>();
            for (int i = 0; i < 400; i++) {
                int g = i % groups;
                results.add(pool.submit(() -> expected.get(g).equals(assignor.assign(specs.get(g), fourStateful))));
            }
            for (java.util.concurrent.Future<Boolean> r : results) {
                assertTrue(r.get(60, java.util.concurrent.TimeUnit.SECONDS));
            }
        } finally {
            pool.shutdownNow();
        }
        assertEquals(412, assignor.metrics().getPlansHonored());
    }
}
