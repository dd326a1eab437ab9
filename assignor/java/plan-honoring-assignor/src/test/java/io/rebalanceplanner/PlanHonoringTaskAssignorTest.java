package io.rebalanceplanner;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.rebalanceplanner.core.CanonicalJson;
import io.rebalanceplanner.core.PlanVerifier;
import io.rebalanceplanner.core.StrictJson;
import io.rebalanceplanner.kafka.EndOffsetSource;
import io.rebalanceplanner.kafka.EndOffsetsUnavailableException;
import io.rebalanceplanner.kafka.PlanSource;
import io.rebalanceplanner.kafka.PlansUnreadableException;
import io.rebalanceplanner.kafka.SharedClients;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.security.KeyPair;
import java.security.KeyPairGenerator;
import java.security.Signature;
import java.time.Instant;
import java.util.Arrays;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.UUID;
import org.apache.kafka.clients.consumer.ConsumerPartitionAssignor.GroupAssignment;
import org.apache.kafka.clients.consumer.ConsumerPartitionAssignor.GroupSubscription;
import org.apache.kafka.clients.consumer.ConsumerPartitionAssignor.Subscription;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.streams.processor.TaskId;
import org.apache.kafka.streams.processor.assignment.KafkaStreamsAssignment;
import org.apache.kafka.streams.processor.assignment.KafkaStreamsAssignment.AssignedTask;
import org.apache.kafka.streams.processor.assignment.TaskAssignmentUtils;
import org.apache.kafka.streams.processor.assignment.TaskAssignor;
import org.apache.kafka.streams.processor.assignment.TaskAssignor.TaskAssignment;
import org.apache.kafka.streams.processor.assignment.assignors.StickyTaskAssignor;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/** {@code assign} against hand-built ApplicationState fakes: the plan path and every fallback path. */
class PlanHonoringTaskAssignorTest {
    private static final String A = "00000000-0000-0000-0000-00000000000a";
    private static final String B = "00000000-0000-0000-0000-00000000000b";
    private static final String C = "00000000-0000-0000-0000-00000000000c";
    private static final long NOW = 1_790_000_000_000L;

    private KeyPair keys;
    /** The clock of assignors built by {@link #assignor(PlanSource, Map)}. */
    private long now = NOW;
    private FakeApplicationState app;
    private final Map<String, byte[]> published = new LinkedHashMap<>();
    /** Every changelog partition ends at the fake's end offset sum (one changelog partition per task). */
    private EndOffsetSource endOffsets = (partitions, timeout) -> {
        Map<TopicPartition, Long> out = new HashMap<>();
        partitions.forEach(tp -> out.put(tp, app.endOffsetSum));
        return out;
    };

    @BeforeEach
    void setUp() throws Exception {
        SharedClients.forgetHonored();
        keys = KeyPairGenerator.getInstance("Ed25519").generateKeyPair();
        app = new FakeApplicationState(2);
        FakeApplicationState.FakeClient a = app.client(A);
        a.previousActive.addAll(List.of(new TaskId(0, 0), new TaskId(0, 1), new TaskId(1, 0), new TaskId(1, 1)));
        a.lags.put(new TaskId(1, 0), -2L);
        a.lags.put(new TaskId(1, 1), -2L);
        FakeApplicationState.FakeClient b = app.client(B);
        b.lags.put(new TaskId(1, 0), 5000L);
        b.lags.put(new TaskId(1, 1), 0L);
    }

    private String rawPublicHex() {
        byte[] der = keys.getPublic().getEncoded();
        return PlanVerifier.toHex(Arrays.copyOfRange(der, der.length - 32, der.length));
    }

    /** Target: A runs 0_0 and 1_1, B runs 0_1 and 1_0; B must restore 1_0, so A keeps it for now. */
    private byte[] signedPlan(String groupId, Map<String, Object> overrides) throws Exception {
        Map<String, Object> target = new TreeMap<>();
        target.put(A, Map.of("active", List.of("0_0", "1_1"), "standby", List.of()));
        target.put(B, Map.of("active", List.of("0_1", "1_0"), "standby", List.of()));
        Map<String, Object> fields = new HashMap<>();
        fields.put("schema_version", 2L);
        fields.put("sequence", NOW - 1000);
        fields.put("plan_id", "plan-1");
        fields.put("group_id", groupId);
        fields.put("snapshot_id", "snap-1");
        fields.put("created_at", NOW - 1000);
        fields.put("valid_until", NOW + 3_600_000);
        fields.put("approved_by", "alice");
        fields.put("approved_at", NOW - 500);
        fields.put("configs", Map.of("acceptable_recovery_lag", 100L, "max_warmup_replicas", 1L,
                "num_standby_replicas", 0L, "probing_rebalance_interval_ms", 10_000L));
        fields.put("target", target);
        fields.put("move_order", List.of("1_0"));
        fields.put("target_digest", PlanVerifier.sha256Hex(CanonicalJson.bytes(target)));
        fields.put("key_id", "k1");
        fields.putAll(overrides);
        fields.putIfAbsent("plan_digest", PlanVerifier.planDigest(fields));
        Signature signer = Signature.getInstance("Ed25519");
        signer.initSign(keys.getPrivate());
        signer.update(CanonicalJson.bytes(fields));
        fields.put("signature", PlanVerifier.toHex(signer.sign()));
        return CanonicalJson.bytes(fields);
    }

    /** Plan checks off, so that follow-ups are the probing rebalances alone (the plan-check tests turn them on). */
    private PlanHonoringTaskAssignor assignor(PlanSource source) {
        return assignor(source, Map.of("rebalance.planner.plan.check.interval.ms", "0"));
    }

    private PlanHonoringTaskAssignor assignor(PlanSource source, Map<String, String> settings) {
        PlanHonoringTaskAssignor assignor = new PlanHonoringTaskAssignor(source, published::putAll,
                (partitions, timeout) -> endOffsets.endOffsets(partitions, timeout), () -> now,
                new StickyTaskAssignor());
        Map<String, Object> config = new HashMap<>();
        config.put("application.id", "app");
        config.put("bootstrap.servers", "localhost:1");
        config.put("rebalance.planner.verify.keys", "k1=" + rawPublicHex());
        config.putAll(settings);
        assignor.configure(config);
        return assignor;
    }

    private static Map<String, String> roles(TaskAssignment assignment) {
        Map<String, String> out = new TreeMap<>();
        for (KafkaStreamsAssignment a : assignment.assignment()) {
            TreeSet<String> tasks = new TreeSet<>();
            for (AssignedTask t : a.tasks().values()) {
                tasks.add(t.id() + "=" + t.type());
            }
            out.put(a.processId().id().toString(), String.join(",", tasks));
        }
        return out;
    }

    /** Runs assign then the post-assignment callback, the way StreamsPartitionAssignor does. */
    private TaskAssignment run(TaskAssignor assignor) {
        TaskAssignment result = assignor.assign(app);
        assertEquals(TaskAssignor.AssignmentError.NONE, TaskAssignmentUtils.validateTaskAssignment(app, result));
        Map<String, Subscription> subs = new HashMap<>();
        for (String pid : List.of(A, B)) {
            UUID uuid = UUID.fromString(pid);
            ByteBuffer data = ByteBuffer.allocate(24).putInt(11).putInt(11)
                    .putLong(uuid.getMostSignificantBits()).putLong(uuid.getLeastSignificantBits());
            data.flip();
            subs.put("member-" + pid.substring(pid.length() - 1), new Subscription(List.of("input"), data, List.of(),
                    7, java.util.Optional.empty()));
        }
        assignor.onAssignmentComputed(new GroupAssignment(Map.of()), new GroupSubscription(subs),
                TaskAssignor.AssignmentError.NONE);
        return result;
    }

    @SuppressWarnings("unchecked")
    private Map<String, Object> report(String pid) throws Exception {
        byte[] value = published.get("app/" + pid);
        assertTrue(value != null, "no report for " + pid + " in " + published.keySet());
        return (Map<String, Object>) StrictJson.parse(value);
    }

    @Test
    @SuppressWarnings("unchecked")
    void honorsAVerifiedPlanThatFits() throws Exception {
        byte[] plan = signedPlan("app", Map.of());
        TaskAssignment result = run(assignor((group, timeout) -> plan));
        Map<String, String> roles = roles(result);
        assertEquals("0_0=ACTIVE,1_0=ACTIVE,1_1=ACTIVE", roles.get(A));
        assertEquals("0_1=ACTIVE,1_0=STANDBY", roles.get(B));
        List<Instant> deadlines = result.assignment().stream()
                .flatMap(a -> a.followupRebalanceDeadline().stream()).toList();
        assertEquals(List.of(Instant.ofEpochMilli(NOW + 10_000)), deadlines);

        Map<String, Object> rb = report(B);
        assertEquals("plan-1", rb.get("plan_id"));
        assertNull(rb.get("fallback_reason"));
        assertEquals(List.of("1_0"), rb.get("warmup_tasks"));
        assertEquals(List.of(), rb.get("standby_tasks"));
        assertEquals("member-b", rb.get("member_id"));
        assertEquals(11L, rb.get("protocol_version"));
        assertEquals(8L, rb.get("generation")); // the members subscribed with 7: this assignment starts 8
        assertEquals("kafka-streams", rb.get("origin"));
        assertEquals(Map.of("1_0", 5000L, "1_1", 0L), rb.get("task_lags"));
        // B holds neither stateful task, yet has state for both: the sums say so, against end offsets of 10,000.
        assertEquals(Map.of("1_0", 5000L, "1_1", 10_000L), rb.get("task_offset_sums"));
        assertNull(rb.get("task_offset_sums_error"));
        assertEquals(Map.of("1_0", -2L, "1_1", -2L), report(A).get("task_offset_sums"));
        Map<String, Object> topology = (Map<String, Object>) rb.get("topology");
        assertEquals(Map.of("source_topics", List.of("app-repartition"), "changelog_topics",
                List.of("app-store-changelog"), "stateful", true), topology.get("1"));
        assertEquals(Boolean.FALSE, ((Map<String, Object>) topology.get("0")).get("stateful"));
        assertEquals(NOW - 1000, SharedClients.planLedger("app").highestSequence());
    }

    @Test
    void reportsTheApplicationsOwnSettingsAndProtocolWhateverThePlanSays() throws Exception {
        // The application runs with one standby and a rack tag; the approved plan says none (an explicit override
        // the pipeline flagged): the leader honors the plan's settings, and the reports still say the group's own.
        app.numStandbyReplicas = 1;
        app.rackAwareAssignmentTags = List.of("zone");
        byte[] plan = signedPlan("app", Map.of());
        TaskAssignment result = run(assignor((group, timeout) -> plan));
        assertEquals("0_1=ACTIVE,1_0=STANDBY", roles(result).get(B)); // the plan's target: no standby of 1_1
        for (String pid : List.of(A, B)) {
            Map<String, Object> r = report(pid);
            assertEquals("plan-1", r.get("plan_id"));
            assertEquals("classic", r.get("protocol"));
            assertEquals(Map.of("acceptable_recovery_lag", 100L, "max_warmup_replicas", 2L, "num_standby_replicas", 1L,
                    "probing_rebalance_interval_ms", 600_000L, "rack_aware_assignment_tags", List.of("zone")),
                    r.get("settings"));
        }
        assertEquals("max_warmup_replicas 2 -> 1, num_standby_replicas 1 -> 0, probing_rebalance_interval_ms 600000 -> "
                + "10000", Honoring.settingsChanges(new io.rebalanceplanner.core.PlanConfigs(
                        100L, 1, 0, 10_000L), app.assignmentConfigs()));
    }

    private void assertFallback(TaskAssignment result, String pid, String reasonPrefix) throws Exception {
        Map<String, String> roles = roles(result);
        assertTrue(roles.containsKey(A) && roles.containsKey(B), roles.toString());
        Map<String, Object> r = report(pid);
        assertNull(r.get("plan_id"));
        if (reasonPrefix == null) {
            assertNull(r.get("fallback_reason"));
        } else {
            assertTrue(String.valueOf(r.get("fallback_reason")).startsWith(reasonPrefix), r.get("fallback_reason")
                    + " should start with " + reasonPrefix);
        }
        assertEquals(List.of(), r.get("warmup_tasks"));
    }

    private static List<Instant> followups(TaskAssignment assignment) {
        return assignment.assignment().stream().flatMap(a -> a.followupRebalanceDeadline().stream()).toList();
    }

    private FakeApplicationState.FakeClient client(String pid) {
        return app.clients.get(new org.apache.kafka.streams.processor.assignment.ProcessId(UUID.fromString(pid)));
    }

    @Test
    void noPlanFallsBackWithoutAReason() throws Exception {
        TaskAssignment result = run(assignor((group, timeout) -> null));
        assertFallback(result, A, null);
        // Everyone is caught up where the balanced placement puts them: nothing to warm up, no probing.
        assertEquals(Map.of(A, "0_0=ACTIVE,1_0=ACTIVE", B, "0_1=ACTIVE,1_1=ACTIVE"), roles(result));
        assertEquals(List.of(), followups(result));
    }

    /**
     * B joins with no state (lag = the changelog end): the KIP-441 fallback keeps every stateful active on A,
     * warms B up on the task balance gives it (as a STANDBY, reported as a warmup) and schedules the probing
     * rebalance at now + probing.rebalance.interval.ms. Kafka's StickyTaskAssignor would hand B a cold active.
     */
    @Test
    void noPlanAndANewcomerWithoutStateGetsAWarmupAndAFollowup() throws Exception {
        client(B).lags.clear();
        TaskAssignment result = run(assignor((group, timeout) -> null));
        assertEquals(Map.of(A, "1_0=ACTIVE,1_1=ACTIVE", B, "0_0=ACTIVE,0_1=ACTIVE,1_1=STANDBY"), roles(result));
        assertEquals(List.of(Instant.ofEpochMilli(NOW + 600_000)), followups(result));
        Map<String, Object> rb = report(B);
        assertNull(rb.get("plan_id"));
        assertNull(rb.get("fallback_reason"));
        assertEquals(List.of("1_1"), rb.get("warmup_tasks"));
        assertEquals(List.of(), rb.get("standby_tasks"));
        assertEquals(Map.of("1_0", 10_000L, "1_1", 10_000L), rb.get("task_lags"));
        assertEquals(Map.of(), rb.get("task_offset_sums"), "lagging the whole changelog is having no state");
    }

    /** A settled group still rebalances at the plan-check interval (5 min by default), so new plans are read. */
    @Test
    void settledGroupSchedulesAPlanCheck() throws Exception {
        TaskAssignment result = run(assignor((group, timeout) -> null, Map.of()));
        assertEquals(Map.of(A, "0_0=ACTIVE,1_0=ACTIVE", B, "0_1=ACTIVE,1_1=ACTIVE"), roles(result));
        assertEquals(List.of(Instant.ofEpochMilli(NOW + 300_000)), followups(result));
        // The reports say so, for `rebalance-planner status`.
        assertEquals(NOW + 300_000, ((Number) report(A).get("next_rebalance_at")).longValue());
        assertEquals(300_000L, ((Number) report(B).get("plan_check_interval_ms")).longValue());
    }

    /** Deferral on (30 s, holding): the leader assigns at NOW, then again at {@code at} without A. */
    private TaskAssignment withoutA(long at, String planCheckMs) {
        Map<String, String> settings = Map.of("rebalance.planner.plan.check.interval.ms", planCheckMs,
                "rebalance.planner.scheduled.rebalance.max.delay.ms", "30000",
                "rebalance.planner.hold.without.caught.up.copy", "true");
        SharedClients.forgetHonored();
        now = NOW;
        run(assignor((group, timeout) -> null, settings));
        FakeApplicationState.FakeClient a = app.clients.remove(client(A).processId());
        now = at;
        TaskAssignment result = run(assignor((group, timeout) -> null, settings));
        app.clients.put(a.processId(), a);
        return result;
    }

    /**
     * A leaves at NOW + 5 s: B keeps its tasks and takes A's stateless 0_0, A's 1_0 (B lags 5000, no caught-up
     * copy) is held, and the follow-up is the deadline (NOW + 35 s) unless the plan check comes first.
     */
    @Test
    void aDepartureIsWaitedOutWithAFollowupAtTheDeadline() throws Exception {
        TaskAssignment deferred = withoutA(NOW + 5_000, "0");
        assertEquals(Map.of(B, "0_0=ACTIVE,0_1=ACTIVE,1_1=ACTIVE"), roles(deferred));
        assertEquals(List.of(Instant.ofEpochMilli(NOW + 35_000)), followups(deferred));
        assertEquals(List.of(Instant.ofEpochMilli(NOW + 35_000)), followups(withoutA(NOW + 5_000, "60000")));
        assertEquals(List.of(Instant.ofEpochMilli(NOW + 9_000)), followups(withoutA(NOW + 5_000, "4000")));
    }

    /** The delay remembered by the leader ends the wait: A still away at its deadline, B runs everything. */
    @Test
    void aDepartureIsResolvedAtItsDeadlineAndAReturnInTimeGetsTheOrdinaryDecision() throws Exception {
        Map<String, String> settings = Map.of("rebalance.planner.plan.check.interval.ms", "0",
                "rebalance.planner.scheduled.rebalance.max.delay.ms", "30000",
                "rebalance.planner.hold.without.caught.up.copy", "true");
        withoutA(NOW + 5_000, "0");
        FakeApplicationState.FakeClient a = app.clients.remove(client(A).processId());
        now = NOW + 35_000;
        TaskAssignment resolved = run(assignor((group, timeout) -> null, settings));
        assertEquals(Map.of(B, "0_0=ACTIVE,0_1=ACTIVE,1_0=ACTIVE,1_1=ACTIVE"), roles(resolved));
        assertEquals(List.of(), followups(resolved));
        app.clients.put(a.processId(), a);
        withoutA(NOW + 5_000, "0");
        now = NOW + 6_000;
        TaskAssignment back = run(assignor((group, timeout) -> null, settings));
        assertEquals(Map.of(A, "0_0=ACTIVE,1_0=ACTIVE", B, "0_1=ACTIVE,1_1=ACTIVE"), roles(back));
        assertEquals(List.of(), followups(back));
    }

    /** The follow-up is whichever comes first: the plan's probing rebalance (10 s) or the plan check. */
    @Test
    void planCheckAndProbingShareOneFollowup() throws Exception {
        byte[] plan = signedPlan("app", Map.of());
        String interval = "rebalance.planner.plan.check.interval.ms";
        assertEquals(List.of(Instant.ofEpochMilli(NOW + 4_000)),
                followups(run(assignor((group, timeout) -> plan, Map.of(interval, "4000")))));
        SharedClients.forgetHonored();
        assertEquals(List.of(Instant.ofEpochMilli(NOW + 10_000)),
                followups(run(assignor((group, timeout) -> plan, Map.of(interval, "60000")))));
    }

    /** End offsets that cannot be listed leave the reports with lags only, and the reason. */
    @Test
    void unlistedEndOffsetsReportLagsAndTheReason() throws Exception {
        endOffsets = (partitions, timeout) -> {
            throw new EndOffsetsUnavailableException("changelog end offsets not listed within 2000 ms", null);
        };
        run(assignor((group, timeout) -> null));
        Map<String, Object> rb = report(B);
        assertEquals(Map.of(), rb.get("task_offset_sums"));
        assertEquals("changelog end offsets not listed within 2000 ms", rb.get("task_offset_sums_error"));
        assertEquals(Map.of("1_0", 5000L, "1_1", 0L), rb.get("task_lags"));
    }

    /** Rejections and unfit targets get the same KIP-441 assignment as having no plan at all. */
    @Test
    void everyFallbackReasonUsesTheKip441Assignor() throws Exception {
        client(B).lags.clear();
        byte[] plan = signedPlan("app", Map.of());
        byte[] tampered = new String(plan, StandardCharsets.UTF_8).replace("alice", "mallory")
                .getBytes(StandardCharsets.UTF_8);
        byte[] otherGroup = signedPlan("other-app", Map.of());
        PlanSource unreadable = (group, timeout) -> {
            throw new PlansUnreadableException("broker unreachable", null);
        };
        Map<String, PlanSource> sources = new LinkedHashMap<>();
        sources.put("none", (group, timeout) -> null);
        sources.put("plans_unreadable", unreadable);
        sources.put("bad_signature", (group, timeout) -> tampered);
        sources.put("wrong_group", (group, timeout) -> otherGroup);
        for (Map.Entry<String, PlanSource> e : sources.entrySet()) {
            published.clear();
            TaskAssignment result = run(assignor(e.getValue()));
            assertEquals(Map.of(A, "1_0=ACTIVE,1_1=ACTIVE", B, "0_0=ACTIVE,0_1=ACTIVE,1_1=STANDBY"), roles(result),
                    e.getKey());
            assertEquals(List.of(Instant.ofEpochMilli(NOW + 600_000)), followups(result), e.getKey());
            Object reason = report(B).get("fallback_reason");
            assertTrue(e.getKey().equals("none") ? reason == null : String.valueOf(reason).startsWith(e.getKey()),
                    e.getKey() + ": " + reason);
        }
        // An unfit target (C is not in it): balance gives B 1_1 again, which it cannot run yet; C takes a
        // stateless task only, since the two stateful tasks went to A and B first.
        app.client(C);
        published.clear();
        TaskAssignment result = assignor((group, timeout) -> plan).assign(app);
        assertEquals(TaskAssignor.AssignmentError.NONE, TaskAssignmentUtils.validateTaskAssignment(app, result));
        assertEquals(Map.of(A, "1_0=ACTIVE,1_1=ACTIVE", B, "0_0=ACTIVE,1_1=STANDBY", C, "0_1=ACTIVE"), roles(result));
        assertEquals(List.of(Instant.ofEpochMilli(NOW + 600_000)), followups(result));
    }

    /** Standbys follow rack.aware.assignment.tags (Streams config) over the members' client.tag.* values. */
    @Test
    void fallbackStandbysSpreadOverClientTags() throws Exception {
        app.numStandbyReplicas = 1;
        app.rackAwareAssignmentTags = List.of("zone");
        FakeApplicationState.FakeClient c = app.client(C);
        c.tags = Map.of("zone", "z2");
        for (FakeApplicationState.FakeClient client : List.of(client(B), c)) {
            client.lags.put(new TaskId(1, 0), 0L);
            client.lags.put(new TaskId(1, 1), 0L);
        }
        TaskAssignment result = assignor((group, timeout) -> null).assign(app);
        assertEquals(TaskAssignor.AssignmentError.NONE, TaskAssignmentUtils.validateTaskAssignment(app, result));
        // A and B share zone z1, so both standbys go to C in z2 (without tags, A would take 1_1's standby).
        assertEquals(Map.of(A, "0_1=ACTIVE,1_0=ACTIVE", B, "1_1=ACTIVE", C, "0_0=ACTIVE,1_0=STANDBY,1_1=STANDBY"),
                roles(result));
        assertEquals(List.of(), followups(result));
    }

    /** If the KIP-441 port fails (here: no lags), Kafka's StickyTaskAssignor assigns; nothing escapes. */
    @Test
    void failingKip441FallbackUsesStickyTaskAssignor() throws Exception {
        app.lagsExplode = true;
        int[] calls = {0};
        TaskAssignor sticky = new TaskAssignor() {
            @Override
            public TaskAssignment assign(org.apache.kafka.streams.processor.assignment.ApplicationState state) {
                calls[0]++;
                return new StickyTaskAssignor().assign(state);
            }
        };
        PlanHonoringTaskAssignor assignor = new PlanHonoringTaskAssignor((group, timeout) -> null, published::putAll,
                endOffsets, () -> NOW, sticky);
        assignor.configure(Map.of("application.id", "app"));
        TaskAssignment result = assignor.assign(app);
        assertEquals(TaskAssignor.AssignmentError.NONE, TaskAssignmentUtils.validateTaskAssignment(app, result));
        assertEquals(1, calls[0]);
    }

    @Test
    void unreadablePlansTopicFallsBack() throws Exception {
        PlanSource broken = (group, timeout) -> {
            throw new PlansUnreadableException("broker unreachable", null);
        };
        assertFallback(run(assignor(broken)), A, "plans_unreadable: broker unreachable");
    }

    @Test
    void aGarbageOrForgedNewestRecordKeepsTheVerifiedPlanAndSaysWhy() throws Exception {
        byte[] plan = signedPlan("app", Map.of());
        run(assignor((group, timeout) -> plan));
        assertEquals("plan-1", report(A).get("plan_id"));
        byte[] forged = new String(signedPlan("app", Map.of("plan_id", "plan-2", "sequence", NOW)),
                StandardCharsets.UTF_8).replace("alice", "mallory").getBytes(StandardCharsets.UTF_8);
        for (byte[] newest : List.of("\u0000garbage".getBytes(StandardCharsets.UTF_8), forged)) {
            published.clear();
            run(assignor((group, timeout) -> newest));
            Map<String, Object> r = report(A);
            assertEquals("plan-1", r.get("plan_id"), "a record that does not verify undoes nothing");
            String reason = String.valueOf(r.get("fallback_reason"));
            assertTrue(reason.startsWith("malformed: ") || reason.startsWith("bad_signature: "), reason);
        }
    }

    @Test
    void anUnreadablePlansTopicKeepsHonoringTheLastVerifiedPlan() throws Exception {
        byte[] plan = signedPlan("app", Map.of());
        run(assignor((group, timeout) -> plan));
        published.clear();
        PlanSource broken = (group, timeout) -> {
            throw new PlansUnreadableException("not authorized to read the plans topic", null);
        };
        TaskAssignment result = run(assignor(broken));
        assertEquals(TaskAssignor.AssignmentError.NONE, TaskAssignmentUtils.validateTaskAssignment(app, result));
        Map<String, Object> r = report(A);
        assertEquals("plan-1", r.get("plan_id"));
        assertTrue(String.valueOf(r.get("fallback_reason")).startsWith("plans_unreadable: not authorized"),
                String.valueOf(r.get("fallback_reason")));
    }

    @Test
    void aPlanReplayedAfterItsWithdrawalIsNotHonoredBySequence() throws Exception {
        byte[] plan = signedPlan("app", Map.of("sequence", NOW + 5));
        run(assignor((group, timeout) -> plan));
        assertEquals("plan-1", report(A).get("plan_id"));
        // The same plan signed again with a lower sequence (an old record replayed): refused, the verified one stays.
        byte[] older = signedPlan("app", Map.of("sequence", NOW + 4));
        published.clear();
        run(assignor((group, timeout) -> older));
        assertEquals("plan-1", report(A).get("plan_id"));
        assertTrue(String.valueOf(report(A).get("fallback_reason")).startsWith("replayed: "));
    }

    @Test
    void aRestartedInstanceKeepsTheSequenceFloorInItsStateDir(@org.junit.jupiter.api.io.TempDir
            java.nio.file.Path dir) throws Exception {
        Map<String, String> withDir = Map.of("rebalance.planner.plan.check.interval.ms", "0",
                "rebalance.planner.state.dir", dir.toString());
        byte[] plan = signedPlan("app", Map.of("sequence", NOW + 5));
        run(assignor((group, timeout) -> plan, withDir));
        assertEquals("plan-1", report(A).get("plan_id"));
        SharedClients.forgetHonored(); // a new JVM: nothing in memory
        published.clear();
        // Compaction left only an old record replayed after the plan: the floor on disk refuses it.
        byte[] older = signedPlan("app", Map.of("sequence", NOW + 4));
        run(assignor((group, timeout) -> older, withDir));
        assertNull(report(A).get("plan_id"));
        assertTrue(String.valueOf(report(A).get("fallback_reason")).startsWith("replayed: "));
        // A damaged floor is not guessed: plans are unreadable until an operator looks.
        try (var files = java.nio.file.Files.list(dir)) {
            java.nio.file.Path floor = files.findFirst().orElseThrow();
            java.nio.file.Files.writeString(floor, "not a number");
        }
        SharedClients.forgetHonored();
        published.clear();
        run(assignor((group, timeout) -> plan, withDir));
        assertNull(report(A).get("plan_id"));
        assertTrue(String.valueOf(report(A).get("fallback_reason")).startsWith("plans_unreadable: the plan sequence"));
    }

    @Test
    void badSignatureFallsBack() throws Exception {
        byte[] plan = signedPlan("app", Map.of());
        byte[] tampered = new String(plan, StandardCharsets.UTF_8).replace("alice", "mallory")
                .getBytes(StandardCharsets.UTF_8);
        assertFallback(run(assignor((group, timeout) -> tampered)), B, "bad_signature: ");
    }

    @Test
    void aSignedPlanWithAHugeTaskIdFallsBackAsMalformedWithAShortReason() throws Exception {
        byte[] plan = signedPlan("app", Map.of("move_order", List.of("0_" + "9".repeat(5_000))));
        assertFallback(run(assignor((group, timeout) -> plan)), A, "malformed: move_order holds '0_999");
        assertTrue(String.valueOf(report(A).get("fallback_reason")).length() < 300);
    }

    @Test
    void aPlanWithAHugeNumberFallsBackAsMalformed() throws Exception {
        byte[] hostile = ("{\"created_at\":" + "9".repeat(5_000) + "}").getBytes(StandardCharsets.UTF_8);
        assertFallback(run(assignor((group, timeout) -> hostile)), A, "malformed: integer outside the signed 64-bit");
    }

    @Test
    void planForAnotherGroupFallsBack() throws Exception {
        byte[] plan = signedPlan("other-app", Map.of());
        assertFallback(run(assignor((group, timeout) -> plan)), A, "wrong_group: ");
    }

    @Test
    void withdrawalFallsBack() throws Exception {
        Map<String, Object> w = new HashMap<>();
        w.put("schema_version", 2L);
        w.put("sequence", NOW);
        w.put("plan_id", "plan-1");
        w.put("group_id", "app");
        w.put("created_at", NOW);
        w.put("withdrawn", true);
        w.put("key_id", "k1");
        Signature signer = Signature.getInstance("Ed25519");
        signer.initSign(keys.getPrivate());
        signer.update(CanonicalJson.bytes(w));
        w.put("signature", PlanVerifier.toHex(signer.sign()));
        byte[] record = CanonicalJson.bytes(w);
        assertFallback(run(assignor((group, timeout) -> record)), A, "withdrawn: ");
        // A plan older than the withdrawal is now a replay.
        byte[] plan = signedPlan("app", Map.of());
        published.clear();
        assertFallback(run(assignor((group, timeout) -> plan)), A, "replayed: ");
    }

    @Test
    void aSignedKeyRevocationOnThePlansTopicDropsThePlanWithoutARedeploy() throws Exception {
        byte[] plan = signedPlan("app", Map.of());
        Map<String, Object> r = new HashMap<>();
        r.put("schema_version", 1L);
        r.put("type", "key_revocation");
        r.put("revoked_key_id", "k1");
        r.put("revoked_at", NOW);
        r.put("revoked_by", "security");
        r.put("reason", "key file leaked");
        r.put("key_id", "k1");
        Signature signer = Signature.getInstance("Ed25519");
        signer.initSign(keys.getPrivate());
        signer.update(CanonicalJson.bytes(r));
        r.put("signature", PlanVerifier.toHex(signer.sign()));
        List<byte[]> revocations = new java.util.ArrayList<>();
        PlanSource source = new PlanSource() {
            private boolean handedOut;

            @Override
            public byte[] newest(String groupId, long timeoutMs) {
                return plan;
            }

            @Override
            public List<byte[]> records(String groupId, long timeoutMs) {
                List<byte[]> fresh = handedOut ? List.of() : List.of(plan);
                handedOut = true;
                return fresh;
            }

            @Override
            public List<byte[]> revocations() {
                return revocations;
            }
        };
        TaskAssignment honored = run(assignor(source));
        assertEquals(null, report(A).get("fallback_reason"), "the plan is honored before the revocation");
        assertFalse(honored.assignment().isEmpty());
        revocations.add(CanonicalJson.bytes(r));
        published.clear();
        assertFallback(run(assignor(source)), A, "revoked_key: ");
    }

    @Test
    void departedInstanceFallsBack() throws Exception {
        app.clients.remove(new org.apache.kafka.streams.processor.assignment.ProcessId(UUID.fromString(B)));
        byte[] plan = signedPlan("app", Map.of());
        TaskAssignment result = app.clients.isEmpty() ? null : assignor((group, timeout) -> plan).assign(app);
        assertEquals(TaskAssignor.AssignmentError.NONE, TaskAssignmentUtils.validateTaskAssignment(app, result));
        assertEquals(1, result.assignment().size());
    }

    @Test
    void unknownInstanceFallsBack() throws Exception {
        app.client("00000000-0000-0000-0000-00000000000c");
        byte[] plan = signedPlan("app", Map.of());
        PlanHonoringTaskAssignor assignor = assignor((group, timeout) -> plan);
        TaskAssignment result = assignor.assign(app);
        assertEquals(TaskAssignor.AssignmentError.NONE, TaskAssignmentUtils.validateTaskAssignment(app, result));
        assignor.onAssignmentComputed(new GroupAssignment(Map.of()), new GroupSubscription(Map.of()),
                TaskAssignor.AssignmentError.NONE);
        Map<String, Object> r = report("00000000-0000-0000-0000-00000000000c");
        assertTrue(String.valueOf(r.get("fallback_reason")).startsWith("unknown_instances: "), r.toString());
        assertEquals("", r.get("member_id"));
        assertEquals(-1L, r.get("generation"));
        assertEquals(1L, r.get("protocol_version"));
    }

    @Test
    void exceptionInsideALagLookupFallsBackInsteadOfThrowing() throws Exception {
        app.lagsExplode = true;
        byte[] plan = signedPlan("app", Map.of());
        assertFallback(run(assignor((group, timeout) -> plan)), A,
                "internal_error: java.lang.IllegalStateException: Tried to lookup lag for unknown task 1_0");
    }

    @Test
    void badConfigurationFallsBackInsteadOfThrowing() throws Exception {
        PlanHonoringTaskAssignor assignor = new PlanHonoringTaskAssignor((group, timeout) -> null, published::putAll,
                endOffsets, () -> NOW, new StickyTaskAssignor());
        assignor.configure(Map.of("application.id", "app", "rebalance.planner.verify.keys", "k1=nothex"));
        TaskAssignment result = assignor.assign(app);
        assertEquals(TaskAssignor.AssignmentError.NONE, TaskAssignmentUtils.validateTaskAssignment(app, result));
    }

    @Test
    void failingFallbacksStillAssignEveryTask() {
        app.lagsExplode = true; // the KIP-441 port needs lags, so it fails first, then the sticky one
        TaskAssignor broken = new TaskAssignor() {
            @Override
            public TaskAssignment assign(org.apache.kafka.streams.processor.assignment.ApplicationState state) {
                throw new IllegalStateException("boom");
            }
        };
        PlanHonoringTaskAssignor assignor = new PlanHonoringTaskAssignor((group, timeout) -> null, published::putAll,
                endOffsets, () -> NOW, broken);
        assignor.configure(Map.of("application.id", "app"));
        TaskAssignment result = assignor.assign(app);
        assertEquals(TaskAssignor.AssignmentError.NONE, TaskAssignmentUtils.validateTaskAssignment(app, result));
        assertFalse(result.assignment().isEmpty());
    }
}
