package io.rebalanceplanner.broker;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.rebalanceplanner.core.PlanVerifier;
import io.rebalanceplanner.core.Verdict;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Paths;
import java.security.PublicKey;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Base64;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestFactory;

class PlanCacheTest {
    static final long NOW = 1_790_000_000_000L;
    static final long HOUR = 3_600_000L;

    private final Signer signer = new Signer();

    private PlanCache cache(int maxGroups) {
        return new PlanCache(new PlanVerifier(signer.verifyKeys(), 60_000), maxGroups);
    }

    private byte[] plan(String group, String planId, long createdAt) {
        return signer.plan(group, planId, createdAt, createdAt + HOUR, Signer.configs(100, 2, 0),
                Map.of("p1", Map.of("active", List.of("0_0")), "p2", Map.of("active", List.of("0_1"))), List.of());
    }

    private static byte[] key(String group) {
        return group.getBytes(StandardCharsets.UTF_8);
    }

    @Test
    void verifiedPlanIsCachedAndIndexedByProcessIdOnceLoaded() {
        PlanCache cache = cache(10);
        cache.offer(key("g"), plan("g", "plan-1", NOW), NOW);
        assertFalse(cache.snapshot().loaded(), "nothing is visible before publish");
        cache.publish(true, null);
        PlanCache.Snapshot s = cache.snapshot();
        assertTrue(s.loaded());
        assertEquals("plan-1", s.entry("g").plan().planId());
        assertEquals(List.of("g"), s.groupsOf("p1"));
        assertEquals(List.of("g"), s.groupsOf("p2"));
        assertEquals(List.of(), s.groupsOf("p3"));
    }

    @Test
    void aVerifiedKeyRevocationDropsThePlanItsKeySignedAndRefusesItsRecords() {
        PlanCache cache = cache(10);
        cache.offer(key("g"), plan("g", "plan-1", NOW), NOW);
        Signer forger = new Signer();
        assertNull(cache.offer(key("_rbp_key_revocation/test-key"), forger.revocation("test-key", NOW), NOW));
        cache.publish(true, null);
        assertEquals("plan-1", cache.snapshot().entry("g").plan().planId(), "a forged revocation revokes nothing");
        cache.offer(key("_rbp_key_revocation/test-key"), signer.revocation("test-key", NOW), NOW);
        cache.publish(true, null);
        PlanCache.Entry entry = cache.snapshot().entry("g");
        assertNull(entry.plan());
        assertTrue(entry.lastRejection().startsWith("revoked_key"), entry.lastRejection());
        assertEquals(NOW, entry.highestSequence(), "the floor stays: older plans do not come back");
        assertEquals("revoked_key", cache.offer(key("g"), plan("g", "plan-2", NOW + 1), NOW).reasonCode());
        assertEquals(java.util.Set.of("test-key"), cache.revoked());
    }

    @Test
    void recordSignedByAnUnknownKeyIsNotCached() {
        Signer other = new Signer();
        PlanCache cache = cache(10);
        Verdict v = cache.offer(key("g"), other.plan("g", "x", NOW, NOW + HOUR, Signer.configs(100, 2, 0),
                Map.of("p1", Map.of("active", List.of("0_0"))), List.of()), NOW);
        assertEquals("bad_signature", v.reasonCode());
        cache.publish(true, null);
        assertNull(cache.snapshot().entry("g"));
        assertEquals(1, cache.rejectedRecords());
    }

    @Test
    void garbageNewestRecordNeverUndoesAVerifiedPlan() {
        PlanCache cache = cache(10);
        cache.offer(key("g"), plan("g", "plan-1", NOW), NOW);
        byte[] tampered = plan("g", "plan-2", NOW + 1);
        tampered[tampered.length - 3] = (byte) (tampered[tampered.length - 3] == '0' ? '1' : '0');
        assertEquals("bad_signature", cache.offer(key("g"), tampered, NOW).reasonCode());
        assertEquals("malformed", cache.offer(key("g"), "{not json".getBytes(StandardCharsets.UTF_8), NOW)
                .reasonCode());
        assertNull(cache.offer(key("g"), null, NOW), "an unsigned tombstone withdraws nothing");
        cache.publish(true, null);
        PlanCache.Entry e = cache.snapshot().entry("g");
        assertEquals("plan-1", e.plan().planId());
        assertTrue(e.lastRejection().startsWith("malformed: "), e.lastRejection());
    }

    @Test
    void olderPlanAfterANewerOneIsAReplayAndKeepsTheNewer() {
        PlanCache cache = cache(10);
        cache.offer(key("g"), plan("g", "new", NOW), NOW);
        assertEquals("replayed", cache.offer(key("g"), plan("g", "old", NOW - 1000), NOW).reasonCode());
        cache.publish(true, null);
        assertEquals("new", cache.snapshot().entry("g").plan().planId());
        assertEquals(Verdict.Outcome.PLAN, cache.offer(key("g"), plan("g", "new", NOW), NOW).outcome(),
                "the same plan again is fine");
    }

    @Test
    void verifiedWithdrawalRemovesThePlanAndOlderPlansStayReplays() {
        PlanCache cache = cache(10);
        cache.offer(key("g"), plan("g", "plan-1", NOW), NOW);
        assertEquals(Verdict.Outcome.WITHDRAWN,
                cache.offer(key("g"), signer.withdrawal("g", "plan-1", NOW + 10), NOW + 10).outcome());
        assertEquals("replayed", cache.offer(key("g"), plan("g", "plan-1", NOW), NOW + 20).reasonCode());
        cache.publish(true, null);
        PlanCache.Entry e = cache.snapshot().entry("g");
        assertNull(e.plan());
        assertEquals(List.of(), cache.snapshot().groupsOf("p1"));
        assertEquals(List.of("g"), cache.snapshot().withdrawnGroupsOf("p1"), "still matched, to report the replay");
    }

    @Test
    void recordKeyedByAnotherGroupIsRejectedAsWrongGroup() {
        PlanCache cache = cache(10);
        assertEquals("wrong_group", cache.offer(key("h"), plan("g", "plan-1", NOW), NOW).reasonCode());
        cache.publish(true, null);
        assertNull(cache.snapshot().entry("h"));
        assertNull(cache.snapshot().entry("g"));
    }

    @Test
    void recordOverOneMebibyteIsMalformed() {
        PlanCache cache = cache(10);
        byte[] big = Arrays.copyOf(plan("g", "plan-1", NOW), 1024 * 1024 + 1);
        Arrays.fill(big, plan("g", "plan-1", NOW).length, big.length, (byte) ' ');
        assertEquals("malformed", cache.offer(key("g"), big, NOW).reasonCode());
    }

    @Test
    void overlongKeyAndGroupsBeyondTheBoundAreRefused() {
        PlanCache cache = cache(2);
        assertNull(cache.offer(key("x".repeat(250)), plan("g", "p", NOW), NOW));
        cache.offer(key("a"), plan("a", "pa", NOW), NOW);
        cache.offer(key("b"), plan("b", "pb", NOW), NOW);
        assertNull(cache.offer(key("c"), plan("c", "pc", NOW), NOW));
        assertEquals(Verdict.Outcome.PLAN, cache.offer(key("a"), plan("a", "pa2", NOW + 1), NOW + 1).outcome(),
                "a group already held is still updated");
        cache.publish(true, null);
        assertEquals(2, cache.snapshot().size());
        assertNull(cache.snapshot().entry("c"));
        assertEquals(1, cache.refusedRecords());
    }

    @Test
    void planDatedInTheFutureIsTakenOnceItsTimeComes() {
        PlanCache cache = cache(10);
        long created = NOW + 10 * 60_000;
        assertEquals("future", cache.offer(key("g"), plan("g", "later", created), NOW).reasonCode());
        cache.retryDeferred(NOW + 1000);
        cache.publish(true, null);
        assertNull(cache.snapshot().entry("g"));
        cache.retryDeferred(created);
        cache.publish(true, null);
        assertEquals("later", cache.snapshot().entry("g").plan().planId());
    }

    @Test
    void snapshotIsImmutableWhileTheWriterGoesOn() {
        PlanCache cache = cache(10);
        cache.offer(key("g"), plan("g", "plan-1", NOW), NOW);
        cache.publish(true, null);
        PlanCache.Snapshot before = cache.snapshot();
        cache.offer(key("g"), plan("g", "plan-2", NOW + 1), NOW + 1);
        cache.publish(true, null);
        assertEquals("plan-1", before.entry("g").plan().planId());
        assertEquals("plan-2", cache.snapshot().entry("g").plan().planId());
    }

    /** plan_ledger_cases.json through the cache: the plan it keeps for the group, and the floor, as every leader. */
    @TestFactory
    List<DynamicTest> sharedPlanLedgerVectors() throws IOException {
        JsonNode root = new ObjectMapper().readTree(Paths.get(System.getProperty("rebalance.planner.vectors.dir",
                "../../../schemas/vectors"), "plan_ledger_cases.json").toFile());
        Map<String, PublicKey> keys = new TreeMap<>();
        root.get("keys").properties().forEach(e -> keys.put(e.getKey(),
                PlanVerifier.ed25519PublicKey(e.getValue().asText())));
        long now = root.get("now_ms").asLong();
        long skew = root.get("clock_skew_ms").asLong();
        List<DynamicTest> tests = new ArrayList<>();
        for (JsonNode c : root.get("cases")) {
            if (c.hasNonNull("remembered_sequence")) {
                continue; // The broker keeps no floor on disk (docs/formats.md, residual risk).
            }
            tests.add(DynamicTest.dynamicTest(c.get("name").asText(), () -> {
                PlanCache cache = new PlanCache(new PlanVerifier(keys, skew), 10);
                String group = c.get("group_id").asText();
                for (JsonNode r : c.get("records")) {
                    byte[] value = null;
                    if (r.hasNonNull("record_b64")) {
                        value = Base64.getDecoder().decode(r.get("record_b64").asText());
                        if (r.has("pad_with_spaces_to")) {
                            int n = r.get("pad_with_spaces_to").asInt();
                            byte[] padded = Arrays.copyOf(value, n);
                            Arrays.fill(padded, value.length, n, (byte) ' ');
                            value = padded;
                        }
                    }
                    cache.offer(group.getBytes(StandardCharsets.UTF_8), value, now);
                }
                cache.retryDeferred(now);
                cache.publish(true, null);
                PlanCache.Entry e = cache.snapshot().entry(group);
                JsonNode expected = c.get("expected");
                // The assignor honors the entry's plan while it is valid (PlanFollowingTaskAssignor checks expiry).
                String honored = e == null || e.plan() == null || now > e.plan().validUntil() ? null
                        : e.plan().planId();
                assertEquals(expected.get("plan_id").isNull() ? null : expected.get("plan_id").asText(), honored);
                Long floor = e == null ? null : e.highestSequence();
                assertEquals(expected.get("highest_sequence").isNull() ? null
                        : expected.get("highest_sequence").asLong(), floor);
                if (e != null && !expected.get("reason_code").isNull() && !"expired".equals(
                        expected.get("reason_code").asText())) {
                    assertTrue(e.lastRejection().startsWith(expected.get("reason_code").asText() + ": "),
                            e.lastRejection());
                }
            }));
        }
        assertTrue(tests.size() >= 15, "most ledger vectors apply: " + tests.size());
        return tests;
    }

    /** signed_plans.json through the cache: the same outcome and reason as the plugin's verifier gives. */
    @TestFactory
    List<DynamicTest> sharedSignedPlanVectors() throws IOException {
        JsonNode root = new ObjectMapper().readTree(Paths.get(System.getProperty("rebalance.planner.vectors.dir",
                "../../../schemas/vectors"), "signed_plans.json").toFile());
        Map<String, PublicKey> keys = new TreeMap<>();
        root.get("keys").properties().forEach(e -> keys.put(e.getKey(),
                PlanVerifier.ed25519PublicKey(e.getValue().asText())));
        long now = root.get("now_ms").asLong();
        long skew = root.get("clock_skew_ms").asLong();
        List<DynamicTest> tests = new ArrayList<>();
        for (JsonNode c : root.get("cases")) {
            if (c.hasNonNull("highest_sequence")) {
                continue; // The replay floor comes from the cache's own history: covered by the tests above.
            }
            tests.add(DynamicTest.dynamicTest(c.get("name").asText(), () -> {
                byte[] value = Base64.getDecoder().decode(c.get("record_b64").asText());
                if (c.has("pad_with_spaces_to")) {
                    int n = c.get("pad_with_spaces_to").asInt();
                    byte[] padded = Arrays.copyOf(value, n);
                    Arrays.fill(padded, value.length, n, (byte) ' ');
                    value = padded;
                }
                PlanCache cache = new PlanCache(new PlanVerifier(keys, skew), 10);
                String group = c.get("group_id").asText();
                Verdict v = cache.offer(group.getBytes(StandardCharsets.UTF_8), value, now);
                assertNotNull(v);
                assertEquals(c.get("outcome").asText(), v.outcome().name().toLowerCase(java.util.Locale.ROOT));
                String code = c.get("reason_code").isNull() ? null : c.get("reason_code").asText();
                assertEquals(code, v.reasonCode());
                cache.publish(true, null);
                PlanCache.Entry e = cache.snapshot().entry(group);
                if (v.outcome() == Verdict.Outcome.PLAN) {
                    assertEquals(c.get("plan_id").asText(), e.plan().planId());
                } else if (v.outcome() == Verdict.Outcome.REJECTED && !"expired".equals(code)) {
                    assertNull(e, "a rejected record caches nothing");
                } else if ("expired".equals(code)) {
                    assertNull(e.lastRejection(), "an expired plan verified: it raises the floor");
                }
            }));
        }
        assertTrue(tests.size() >= 40, "most signed-plan vectors apply: " + tests.size());
        return tests;
    }
}
