package io.rebalanceplanner;

import io.rebalanceplanner.core.ClientTasks;
import io.rebalanceplanner.core.CodePoints;
import io.rebalanceplanner.core.Deferral;
import io.rebalanceplanner.core.FitCheck;
import io.rebalanceplanner.core.HighAvailability;
import io.rebalanceplanner.core.Honor;
import io.rebalanceplanner.core.LagIndex;
import io.rebalanceplanner.core.LiveAssignment;
import io.rebalanceplanner.core.LiveGroup;
import io.rebalanceplanner.core.Plan;
import io.rebalanceplanner.core.PlanConfigs;
import io.rebalanceplanner.core.PlanVerifier;
import io.rebalanceplanner.core.Task;
import io.rebalanceplanner.core.KeyRevocation;
import io.rebalanceplanner.core.PlanLedger;
import io.rebalanceplanner.kafka.EndOffsetSource;
import io.rebalanceplanner.kafka.EndOffsetsUnavailableException;
import io.rebalanceplanner.kafka.PlanSource;
import io.rebalanceplanner.kafka.RevokedKeysFile;
import io.rebalanceplanner.kafka.PlannerSettings;
import io.rebalanceplanner.kafka.PlansUnreadableException;
import io.rebalanceplanner.kafka.SequenceFloor;
import io.rebalanceplanner.kafka.ReportSink;
import io.rebalanceplanner.kafka.SharedClients;
import io.rebalanceplanner.kafka.StateReports;
import java.time.Instant;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.function.LongSupplier;
import org.apache.kafka.clients.consumer.ConsumerPartitionAssignor.GroupAssignment;
import org.apache.kafka.clients.consumer.ConsumerPartitionAssignor.GroupSubscription;
import org.apache.kafka.streams.processor.TaskId;
import org.apache.kafka.streams.processor.assignment.ApplicationState;
import org.apache.kafka.streams.processor.assignment.AssignmentConfigs;
import org.apache.kafka.streams.processor.assignment.KafkaStreamsAssignment;
import org.apache.kafka.streams.processor.assignment.KafkaStreamsAssignment.AssignedTask;
import org.apache.kafka.streams.processor.assignment.KafkaStreamsState;
import org.apache.kafka.streams.processor.assignment.ProcessId;
import org.apache.kafka.streams.processor.assignment.TaskAssignmentUtils;
import org.apache.kafka.streams.processor.assignment.TaskAssignor;
import org.apache.kafka.streams.processor.assignment.TaskInfo;
import org.apache.kafka.streams.processor.assignment.assignors.StickyTaskAssignor;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A KIP-924 task assignor that honors Ed25519-signed plans from the plans topic and otherwise assigns like
 * Kafka's default HighAvailabilityTaskAssignor (our port, {@link HighAvailability}: Kafka 4.4.0 keeps its own
 * internal, and its public StickyTaskAssignor ignores lags and warmups).
 *
 * <p>Enable with {@code task.assignor.class=io.rebalanceplanner.PlanHonoringTaskAssignor} and
 * {@code rebalance.planner.verify.keys=<key_id>=<64 hex>}. {@link #assign} never throws: whatever goes wrong,
 * the group gets the fallback assignment and the state reports say why. The fallback itself falls back to
 * StickyTaskAssignor, and that to keeping previous actives. Plans are read only during rebalances, so the
 * leader also asks for a follow-up rebalance every {@code rebalance.planner.plan.check.interval.ms}.
 *
 * <p>With {@code rebalance.planner.scheduled.rebalance.max.delay.ms} set, a member that leaves keeps its place
 * until the delay passes ({@link Deferral}): whatever was decided (the fallback, or a plan whose target gives the
 * departed member nothing; a plan that gives it tasks does not fit and falls back) is replaced by the deferred
 * assignment, with a follow-up rebalance at the deadline. The leader remembers departures in memory only.
 */
public class PlanHonoringTaskAssignor implements TaskAssignor {
    private static final Logger LOG = LoggerFactory.getLogger(PlanHonoringTaskAssignor.class);

    /** "num_standby_replicas 1 -> 0, ..." where the plan's settings differ from the application's own; "" if none. */
    static String settingsChanges(PlanConfigs plan, AssignmentConfigs own) {
        List<String> out = new ArrayList<>();
        long[][] pairs = {
            {own.acceptableRecoveryLag(), plan.acceptableRecoveryLag()},
            {own.maxWarmupReplicas(), plan.maxWarmupReplicas()},
            {own.numStandbyReplicas(), plan.numStandbyReplicas()},
            {own.probingRebalanceIntervalMs(), plan.probingRebalanceIntervalMs()},
        };
        for (int i = 0; i < pairs.length; i++) {
            if (pairs[i][0] != pairs[i][1]) {
                out.add(PlanConfigs.NAMES.get(i) + " " + pairs[i][0] + " -> " + pairs[i][1]);
            }
        }
        return String.join(", ", out);
    }

    private final LongSupplier clock;
    /** Used only when the KIP-441 port fails: Kafka's public assignor (lag-blind, but always available). */
    private final TaskAssignor lastFallback;
    private PlanSource planSource;
    private ReportSink reportSink;
    private EndOffsetSource endOffsets;
    private PlannerSettings settings;
    private PlanVerifier verifier;
    private String configError;
    private StateReports.Pending pending;

    public PlanHonoringTaskAssignor() {
        this(null, null, null, System::currentTimeMillis, new StickyTaskAssignor());
    }

    /**
     * For tests: fixed plan source, report sink, end offsets and clock instead of the shared Kafka clients, and
     * the assignor used when the KIP-441 fallback fails.
     */
    PlanHonoringTaskAssignor(PlanSource planSource, ReportSink reportSink, EndOffsetSource endOffsets,
            LongSupplier clock, TaskAssignor lastFallback) {
        this.planSource = planSource;
        this.reportSink = reportSink;
        this.endOffsets = endOffsets;
        this.clock = clock;
        this.lastFallback = lastFallback;
    }

    /** A fallback assignment, with warmups told apart from standbys when our own assignor made it. */
    private static final class Fallback {
        final TaskAssignment assignment;
        final Map<String, ClientTasks> tasks;

        Fallback(TaskAssignment assignment, Map<String, ClientTasks> tasks) {
            this.assignment = assignment;
            this.tasks = tasks;
        }
    }

    /**
     * Receives the main consumer's configuration, which carries every Streams setting (including unknown
     * {@code rebalance.planner.*} keys) plus Kafka-internal objects we ignore. Called on every rebalance on a
     * fresh instance; a bad setting is remembered and reported instead of failing the rebalance.
     */
    @Override
    public void configure(Map<String, ?> configs) {
        try {
            settings = PlannerSettings.from(configs);
            verifier = new PlanVerifier(settings.verifyKeys(), settings.clockSkewMs());
            if (planSource == null) {
                planSource = SharedClients.planSource(settings);
            }
            if (reportSink == null && settings.reportsEnabled()) {
                reportSink = SharedClients.reportSink(settings);
            }
            if (endOffsets == null && settings.reportsEnabled() && settings.offsetsTimeoutMs() > 0) {
                endOffsets = SharedClients.endOffsets(settings);
            }
            if (settings.verifyKeys().isEmpty()) {
                LOG.warn("{} has no keys: no plan can verify, the group uses the KIP-441 fallback",
                        PlannerSettings.VERIFY_KEYS);
            }
        } catch (RuntimeException e) {
            configError = e.getClass().getSimpleName() + ": " + e.getMessage();
            LOG.error("rebalance planner configuration is invalid, using the KIP-441 fallback: {}", configError);
        }
    }

    @Override
    public TaskAssignment assign(ApplicationState applicationState) {
        long now = clock.getAsLong();
        String planId = null;
        String fallbackReason;
        Map<String, Map<Task, Long>> lags = null;
        try {
            if (configError != null) {
                throw new IllegalStateException("configuration: " + configError);
            }
            Map<ProcessId, KafkaStreamsState> states = applicationState.kafkaStreamsStates(true);
            lags = lagsOf(states);
            String groupId = settings.applicationId();
            // The group's records since the last read, folded into what this JVM knows of them (the order rule by
            // sequence, PlanLedger): a replayed or unverifiable newest record never undoes a verified plan.
            PlanLedger ledger = SharedClients.planLedger(groupId);
            SequenceFloor floor = SequenceFloor.of(settings);
            String unreadable = null;
            RevokedKeysFile revokedFile = RevokedKeysFile.of(settings);
            try {
                ledger = ledger.remember(floor.read());
                List<byte[]> fresh = planSource.records(groupId, settings.planReadTimeoutMs());
                // Revocations first: a plan signed by a revoked key is dropped, and no record of that key verifies.
                Set<String> kept = revokedFile == null ? Set.of() : revokedFile.read();
                Set<String> revoked = new HashSet<>(kept);
                revoked.addAll(KeyRevocation.revokedKeyIds(planSource.revocations(), verifier.keys()));
                if (!revoked.equals(verifier.revoked())) {
                    LOG.warn("plan-signing key(s) {} revoked for {}", revoked, groupId);
                    verifier = verifier.revoking(revoked);
                }
                ledger = ledger.revoke(revoked);
                if (revokedFile != null) {
                    revokedFile.keep(kept, revoked);
                }
                for (byte[] value : fresh) {
                    ledger = ledger.offer(value, verifier, now);
                }
            } catch (PlansUnreadableException e) {
                // Not "no plan": the last verified plan stays honored while valid, else Kafka's own assignment.
                unreadable = "plans_unreadable: " + e.getMessage();
            }
            ledger = ledger.recheck(verifier, now);
            SharedClients.planLedger(groupId, ledger);
            floor.keep(ledger.highestSequence());
            if (ledger.isEmpty() && unreadable == null) {
                LOG.info("no plan for {} on the plans topic: Kafka's own (KIP-441) assignment", groupId);
                return finish(applicationState, fallback(applicationState, now), null, null, lags, now);
            }
            PlanLedger.Choice choice = ledger.choice(now);
            String reported = unreadable != null ? unreadable : choice.reason();
            if (choice.plan() == null) {
                return finish(applicationState, fallback(applicationState, now), null, reported, lags, now);
            }
            Plan plan = choice.plan();
            LiveGroup group = liveGroup(states, applicationState.allTasks());
            FitCheck.Unfit unfit = FitCheck.unfitReason(plan.target(), group, plan.configs());
            if (unfit != null) {
                // A kept plan that does not fit: the refused newest record (what was last published) is the news.
                return finish(applicationState, fallback(applicationState, now), null, reported != null ? reported
                        : unfit.code() + ": plan " + plan.planId() + ": " + unfit.detail(), lags, now);
            }
            List<String> pids = new ArrayList<>();
            for (LiveGroup.Client c : group.clients()) {
                pids.add(c.processId());
            }
            pids.sort(CodePoints.ORDER);
            LagIndex index = new LagIndex(pids, lags, Map.of(), plan.configs().acceptableRecoveryLag());
            LiveAssignment honored = Honor.honorTarget(FitCheck.targetFor(plan.target(), group), group,
                    plan.configs(), plan.moveOrder(), index);
            Instant next = followupAt(now, honored.followupRebalance(), plan.configs().probingRebalanceIntervalMs());
            TaskAssignment assignment = toKafka(states, honored.assignment(), next);
            TaskAssignor.AssignmentError error = TaskAssignmentUtils.validateTaskAssignment(applicationState,
                    assignment);
            if (error != TaskAssignor.AssignmentError.NONE) {
                throw new IllegalStateException("honoring plan " + plan.planId() + " gave an invalid assignment: "
                        + error);
            }
            planId = plan.planId();
            LOG.info("honoring plan {} (next rebalance: {})", planId, describe(honored.followupRebalance(), next));
            String changed = settingsChanges(plan.configs(), applicationState.assignmentConfigs());
            if (!changed.isEmpty()) {
                // The rule (docs/group-settings.md): a verified plan is honored with the settings a person approved,
                // which the pipeline flagged as an explicit override; the application's own return with the fallback.
                LOG.warn("plan {} is honored with its approved settings, not the application's own: {}", planId,
                        changed);
            }
            if (reported != null) {
                LOG.warn("honoring plan {}, the last verified one: {}", planId, reported);
            }
            return finish(applicationState, new Fallback(assignment, honored.assignment()), planId, reported, lags,
                    now);
        } catch (Throwable t) {
            fallbackReason = "internal_error: " + t.getClass().getName() + ": " + t.getMessage();
            LOG.error("rebalance planner failed, using the KIP-441 fallback: {}", fallbackReason, t);
            return finish(applicationState, fallback(applicationState, now), planId, fallbackReason, lags, now);
        }
    }

    /**
     * The assignment when no plan is honored, whatever the reason: the KIP-441 port with the application's own
     * settings (warmups as standby tasks, a probing rebalance while copies still move). If the port fails,
     * Kafka's StickyTaskAssignor; if even that fails, the previous owners keep their tasks so the group runs.
     */
    private Fallback fallback(ApplicationState applicationState, long now) {
        try {
            Map<ProcessId, KafkaStreamsState> states = applicationState.kafkaStreamsStates(true);
            AssignmentConfigs kafka = applicationState.assignmentConfigs();
            PlanConfigs configs = new PlanConfigs(kafka.acceptableRecoveryLag(), kafka.maxWarmupReplicas(),
                    kafka.numStandbyReplicas(), kafka.probingRebalanceIntervalMs(), kafka.rackAwareAssignmentTags());
            LiveAssignment ha = HighAvailability.assign(liveGroup(states, applicationState.allTasks()),
                    configs, lagsOf(states));
            Instant next = followupAt(now, ha.followupRebalance(), configs.probingRebalanceIntervalMs());
            TaskAssignment assignment = toKafka(states, ha.assignment(), next);
            TaskAssignor.AssignmentError error = TaskAssignmentUtils.validateTaskAssignment(applicationState,
                    assignment);
            if (error != TaskAssignor.AssignmentError.NONE) {
                throw new IllegalStateException("the KIP-441 fallback gave an invalid assignment: " + error);
            }
            LOG.info("KIP-441 fallback assignment (next rebalance: {})", describe(ha.followupRebalance(), next));
            return new Fallback(assignment, ha.assignment());
        } catch (Throwable t) {
            LOG.error("the KIP-441 fallback failed; using Kafka's StickyTaskAssignor", t);
        }
        try {
            return new Fallback(lastFallback.assign(applicationState), null);
        } catch (Throwable t) {
            LOG.error("the sticky fallback failed too; keeping previous active tasks", t);
            return new Fallback(lastResort(applicationState), null);
        }
    }

    /**
     * When the group should rebalance next, or null: the probing deadline while copies still move, and at the
     * latest the next plan check, which in a settled group changes nothing and so revokes nothing.
     */
    private Instant followupAt(long now, boolean moving, long probingIntervalMs) {
        long at = moving ? now + probingIntervalMs : Long.MAX_VALUE;
        if (settings != null && settings.planCheckIntervalMs() > 0) {
            at = Math.min(at, now + settings.planCheckIntervalMs());
        }
        return at == Long.MAX_VALUE ? null : Instant.ofEpochMilli(at);
    }

    /** The follow-up as the log names it: when, and whether copies still move or only the plan check is due. */
    private static String describe(boolean moving, Instant at) {
        if (at == null) {
            return "none scheduled";
        }
        return at + (moving ? " (copies still moving)" : " (plan check)");
    }

    static TaskAssignment lastResort(ApplicationState applicationState) {
        try {
            Map<ProcessId, KafkaStreamsState> states = new TreeMap<>(applicationState.kafkaStreamsStates(false));
            Map<ProcessId, KafkaStreamsAssignment> out = new TreeMap<>();
            for (ProcessId pid : states.keySet()) {
                out.put(pid, KafkaStreamsAssignment.of(pid, new HashSet<>()));
            }
            List<ProcessId> order = new ArrayList<>(states.keySet());
            int next = 0;
            for (TaskId task : new java.util.TreeSet<>(applicationState.allTasks().keySet())) {
                ProcessId owner = null;
                for (Map.Entry<ProcessId, KafkaStreamsState> e : states.entrySet()) {
                    if (e.getValue().previousActiveTasks().contains(task)) {
                        owner = e.getKey();
                        break;
                    }
                }
                if (owner == null) {
                    owner = order.get(next++ % order.size());
                }
                out.get(owner).assignTask(new AssignedTask(task, AssignedTask.Type.ACTIVE));
            }
            return new TaskAssignment(out.values());
        } catch (Throwable t) {
            LOG.error("no assignment could be computed", t);
            return new TaskAssignment(List.of());
        }
    }

    private TaskAssignment finish(ApplicationState applicationState, Fallback decided, String planId,
            String fallbackReason, Map<String, Map<Task, Long>> lags, long now) {
        Fallback result = deferred(applicationState, decided, lags, now);
        if (result != decided) {
            // A plan that fits the members left is not what they run meanwhile: say so instead of naming it.
            if (planId != null) {
                fallbackReason = "deferred: member(s) away, plan " + planId + " resumes after";
            }
            planId = null;
        }
        try {
            if (fallbackReason != null && planId == null) {
                LOG.info("not honoring a plan: {}", fallbackReason);
            }
            if (reportSink != null && settings != null) {
                Map<Task, Long> endOffsetSums = null;
                String offsetSumsError = null;
                if (endOffsets == null) {
                    offsetSumsError = PlannerSettings.OFFSETS_TIMEOUT_MS + " is 0: lags only";
                } else if (lags != null) {
                    try {
                        Map<TaskId, TaskInfo> tasks = applicationState.allTasks();
                        endOffsetSums = StateReports.endOffsetSums(tasks, endOffsets.endOffsets(
                                StateReports.changelogPartitions(tasks), settings.offsetsTimeoutMs()));
                    } catch (EndOffsetsUnavailableException e) {
                        offsetSumsError = e.getMessage();
                        LOG.warn("reporting lags without offset sums: {}", offsetSumsError);
                    }
                }
                pending = StateReports.pending(settings.applicationId(), applicationState, result.assignment,
                        result.tasks, lags, endOffsetSums, offsetSumsError, planId, fallbackReason, now);
                // What `rebalance-planner status` tells people: when this group looks at the plans topic again.
                pending.putEverywhere("next_rebalance_at", nextRebalanceAt(result.assignment));
                pending.putEverywhere("plan_check_interval_ms", settings.planCheckIntervalMs());
            }
        } catch (Throwable t) {
            LOG.warn("could not prepare state reports: {}", t.toString());
            pending = null;
        }
        return result.assignment;
    }

    /** The earliest follow-up rebalance the assignment asks for (epoch ms), or null when none is scheduled. */
    static Long nextRebalanceAt(TaskAssignment assignment) {
        Long earliest = null;
        for (KafkaStreamsAssignment a : assignment.assignment()) {
            Instant at = a.followupRebalanceDeadline().orElse(null);
            if (at != null && (earliest == null || at.toEpochMilli() < earliest)) {
                earliest = at.toEpochMilli();
            }
        }
        return earliest;
    }

    /**
     * The deferred assignment while departed members are within the delay, else {@code decided} unchanged.
     * What was assigned is remembered for the next rebalance this JVM leads; a memory older than the delay is
     * not trusted to tell who left just now (another leader may have run the group since).
     */
    private Fallback deferred(ApplicationState applicationState, Fallback decided,
            Map<String, Map<Task, Long>> lags, long now) {
        if (settings == null || settings.deferral().scheduledRebalanceMaxDelayMs() == 0 || lags == null) {
            return decided;
        }
        Deferral.Settings rules = settings.deferral();
        String groupId = settings.applicationId();
        SharedClients.Remembered memory = SharedClients.remembered(groupId);
        Map<String, ClientTasks> previous = null;
        Map<String, Deferral.Departure> known = Map.of();
        if (memory != null) {
            known = memory.departures();
            if (now - memory.atMs() < rules.scheduledRebalanceMaxDelayMs()) {
                previous = memory.assignment();
            }
        }
        try {
            Map<ProcessId, KafkaStreamsState> states = applicationState.kafkaStreamsStates(true);
            LiveGroup group = liveGroup(states, applicationState.allTasks());
            Map<String, Deferral.Departure> pending = Deferral.pending(previous, group, known, now, rules);
            if (pending.isEmpty() || previous == null) {
                SharedClients.remember(groupId, new SharedClients.Remembered(now, decided.tasks, pending));
                return decided;
            }
            List<String> pids = new ArrayList<>();
            for (LiveGroup.Client c : group.clients()) {
                pids.add(c.processId());
            }
            pids.sort(CodePoints.ORDER);
            LagIndex index = new LagIndex(pids, lags, Map.of(),
                    applicationState.assignmentConfigs().acceptableRecoveryLag());
            Deferral.Result deferral = Deferral.defer(previous, group, index, Map.of(), pending, now, rules);
            Instant checkAt = followupAt(now, false, 0);
            Instant deadline = Instant.ofEpochMilli(now + deferral.rebalanceInMs());
            Instant at = checkAt != null && checkAt.isBefore(deadline) ? checkAt : deadline;
            TaskAssignment assignment = toKafka(states, deferral.assignment().assignment(), at);
            TaskAssignor.AssignmentError error = TaskAssignmentUtils.validateTaskAssignment(applicationState,
                    assignment);
            if (error != TaskAssignor.AssignmentError.NONE) {
                throw new IllegalStateException("the deferred assignment is invalid: " + error);
            }
            LOG.info("deferring: {} away, {} task(s) held, rebalancing in {} ms", pending.keySet(),
                    deferral.held().size(), deferral.rebalanceInMs());
            SharedClients.remember(groupId,
                    new SharedClients.Remembered(now, deferral.assignment().assignment(), pending));
            return new Fallback(assignment, deferral.assignment().assignment());
        } catch (Throwable t) {
            LOG.error("deferral failed, assigning without it", t);
            SharedClients.remember(groupId, new SharedClients.Remembered(now, decided.tasks, Map.of()));
            return decided;
        }
    }

    /**
     * Called once the consumer group assignment exists; reports are published here because only now the
     * members' ids, generations and subscription versions are known.
     */
    @Override
    public void onAssignmentComputed(GroupAssignment assignment, GroupSubscription subscription,
            AssignmentError error) {
        StateReports.Pending toSend = pending;
        pending = null;
        if (toSend == null || reportSink == null) {
            return;
        }
        try {
            reportSink.publish(toSend.records(subscription, clock.getAsLong()));
        } catch (Throwable t) {
            LOG.warn("state reports were not published: {}", t.toString());
        }
    }

    static Task task(TaskId id) {
        return new Task(id.subtopology(), id.partition());
    }

    /** Lags exactly as Kafka computed them: -2 running active, -3 unknown, otherwise end minus checkpoint. */
    static Map<String, Map<Task, Long>> lagsOf(Map<ProcessId, KafkaStreamsState> states) {
        Map<String, Map<Task, Long>> lags = new HashMap<>();
        for (Map.Entry<ProcessId, KafkaStreamsState> e : states.entrySet()) {
            Map<Task, Long> client = new HashMap<>();
            for (Map.Entry<TaskId, Long> lag : e.getValue().statefulTasksToLagSums().entrySet()) {
                client.put(task(lag.getKey()), lag.getValue());
            }
            lags.put(e.getKey().id().toString(), client);
        }
        return lags;
    }

    static LiveGroup liveGroup(Map<ProcessId, KafkaStreamsState> states, Map<TaskId, TaskInfo> tasks) {
        List<LiveGroup.Client> clients = new ArrayList<>();
        for (Map.Entry<ProcessId, KafkaStreamsState> e : states.entrySet()) {
            KafkaStreamsState s = e.getValue();
            clients.add(new LiveGroup.Client(e.getKey().id().toString(), s.numProcessingThreads(),
                    tasks(s.previousActiveTasks()), tasks(s.previousStandbyTasks()), s.clientTags()));
        }
        Set<Task> stateful = new HashSet<>();
        Set<Task> stateless = new HashSet<>();
        for (TaskInfo info : tasks.values()) {
            (info.isStateful() ? stateful : stateless).add(task(info.id()));
        }
        return new LiveGroup(clients, stateful, stateless);
    }

    private static Set<Task> tasks(Set<TaskId> ids) {
        Set<Task> out = new HashSet<>();
        for (TaskId id : ids) {
            out.add(task(id));
        }
        return out;
    }

    /** Warmups become standby tasks: KIP-924 has no separate role, a standby that catches up is a warmup. */
    static TaskAssignment toKafka(Map<ProcessId, KafkaStreamsState> states, Map<String, ClientTasks> tasks,
            Instant followupAt) {
        Map<String, ProcessId> byName = new HashMap<>();
        for (ProcessId pid : states.keySet()) {
            byName.put(pid.id().toString(), pid);
        }
        Map<Task, TaskId> kafkaIds = new HashMap<>();
        List<KafkaStreamsAssignment> out = new ArrayList<>();
        boolean followupSet = false;
        for (Map.Entry<String, ClientTasks> e : tasks.entrySet()) {
            ProcessId pid = byName.get(e.getKey());
            Set<AssignedTask> assigned = new HashSet<>();
            for (Task t : e.getValue().active()) {
                assigned.add(new AssignedTask(kafkaId(kafkaIds, t), AssignedTask.Type.ACTIVE));
            }
            for (Task t : e.getValue().standby()) {
                assigned.add(new AssignedTask(kafkaId(kafkaIds, t), AssignedTask.Type.STANDBY));
            }
            for (Task t : e.getValue().warmup()) {
                assigned.add(new AssignedTask(kafkaId(kafkaIds, t), AssignedTask.Type.STANDBY));
            }
            KafkaStreamsAssignment a = KafkaStreamsAssignment.of(pid, assigned);
            if (followupAt != null && !followupSet) {
                // One member asking for the probing rebalance is enough; Kafka's own assignor does the same.
                a = a.withFollowupRebalance(followupAt);
                followupSet = true;
            }
            out.add(a);
        }
        return new TaskAssignment(out);
    }

    private static TaskId kafkaId(Map<Task, TaskId> cache, Task t) {
        return cache.computeIfAbsent(t, k -> new TaskId(Math.toIntExact(k.subtopology()),
                Math.toIntExact(k.partition())));
    }
}
