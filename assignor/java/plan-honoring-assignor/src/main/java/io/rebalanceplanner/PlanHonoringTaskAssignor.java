package io.rebalanceplanner;

import io.rebalanceplanner.core.HighAvailability;
import io.rebalanceplanner.core.LiveAssignment;
import io.rebalanceplanner.core.PlanConfigs;
import io.rebalanceplanner.core.PlanVerifier;
import io.rebalanceplanner.kafka.EndOffsetSource;
import io.rebalanceplanner.kafka.PlanSource;
import io.rebalanceplanner.kafka.PlannerSettings;
import io.rebalanceplanner.kafka.ReportSink;
import io.rebalanceplanner.kafka.SharedClients;
import io.rebalanceplanner.kafka.StateReports;
import java.time.Instant;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.function.LongSupplier;
import org.apache.kafka.clients.consumer.ConsumerPartitionAssignor.GroupAssignment;
import org.apache.kafka.clients.consumer.ConsumerPartitionAssignor.GroupSubscription;
import org.apache.kafka.streams.processor.TaskId;
import org.apache.kafka.streams.processor.assignment.ApplicationState;
import org.apache.kafka.streams.processor.assignment.KafkaStreamsAssignment;
import org.apache.kafka.streams.processor.assignment.KafkaStreamsAssignment.AssignedTask;
import org.apache.kafka.streams.processor.assignment.KafkaStreamsState;
import org.apache.kafka.streams.processor.assignment.ProcessId;
import org.apache.kafka.streams.processor.assignment.TaskAssignor;
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
 * <p>Each {@code assign} reads the group once ({@link GroupView}) and passes it through three steps in their own
 * classes: {@link Honoring} (the plans' decision), {@link Deferring} (a departed member keeps its place while
 * {@code rebalance.planner.scheduled.rebalance.max.delay.ms} runs: whatever was decided, the fallback or a plan
 * whose target gives the departed member nothing, is replaced by the deferred assignment; a plan that gives it
 * tasks does not fit and falls back) and {@link Reporting} (the state reports).
 */
public class PlanHonoringTaskAssignor implements TaskAssignor {
    private static final Logger LOG = LoggerFactory.getLogger(PlanHonoringTaskAssignor.class);

    private final LongSupplier clock;
    /** Used only when the KIP-441 port fails: Kafka's public assignor (lag-blind, but always available). */
    private final TaskAssignor lastFallback;
    private PlanSource planSource;
    private ReportSink reportSink;
    private EndOffsetSource endOffsets;
    private PlannerSettings settings;
    private String configError;
    private Honoring honoring;
    private Deferring deferring;
    private Reporting reporting;
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

    /**
     * Receives the main consumer's configuration, which carries every Streams setting (including unknown
     * {@code rebalance.planner.*} keys) plus Kafka-internal objects we ignore. Called on every rebalance on a
     * fresh instance; a bad setting is remembered and reported instead of failing the rebalance.
     */
    @Override
    public void configure(Map<String, ?> configs) {
        try {
            settings = PlannerSettings.from(configs);
            PlanVerifier verifier = new PlanVerifier(settings.verifyKeys(), settings.clockSkewMs());
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
            honoring = new Honoring(settings, verifier, planSource);
        } catch (RuntimeException e) {
            configError = e.getClass().getSimpleName() + ": " + e.getMessage();
            LOG.error("rebalance planner configuration is invalid, using the KIP-441 fallback: {}", configError);
        }
        // Settings that parsed still defer and report, even if a later part of the configuration failed.
        if (settings != null) {
            deferring = new Deferring(settings);
            if (reportSink != null) {
                reporting = new Reporting(settings, reportSink, endOffsets);
            }
        }
    }

    @Override
    public TaskAssignment assign(ApplicationState applicationState) {
        long now = clock.getAsLong();
        GroupView view = null;
        Throwable unreadable = null;
        try {
            view = GroupView.of(applicationState);
        } catch (Throwable t) {
            unreadable = t;
        }
        Honoring.Outcome outcome;
        try {
            if (configError != null) {
                throw new IllegalStateException("configuration: " + configError);
            }
            if (unreadable != null) {
                throw unreadable;
            }
            outcome = honoring.decide(view, now);
        } catch (Throwable t) {
            String reason = "internal_error: " + t.getClass().getName() + ": " + t.getMessage();
            LOG.error("rebalance planner failed, using the KIP-441 fallback: {}", reason, t);
            outcome = Honoring.Outcome.notHonored(reason);
        }
        Decided decided = outcome.honored() != null ? outcome.honored() : fallback(applicationState, view, now);
        // With a bad configuration only the fallback uses the lags: deferral and the reports' lags follow
        // settings that did not all parse, so they stay out.
        GroupView trusted = configError == null ? view : null;
        String planId = outcome.planId();
        String reason = outcome.reason();
        Decided result = deferring == null ? decided : deferring.apply(trusted, decided, now);
        if (result != decided) {
            // A plan that fits the members left is not what they run meanwhile: say so instead of naming it.
            if (planId != null) {
                reason = "deferred: member(s) away, plan " + planId + " resumes after";
            }
            planId = null;
        }
        try {
            if (reason != null && planId == null) {
                LOG.info("not honoring a plan: {}", reason);
            }
            pending = reporting == null ? null
                    : reporting.prepare(applicationState, trusted, result, planId, reason, now);
        } catch (Throwable t) {
            LOG.warn("could not prepare state reports: {}", t.toString());
            pending = null;
        }
        return result.assignment();
    }

    /**
     * The assignment when no plan is honored, whatever the reason: the KIP-441 port with the application's own
     * settings (warmups as standby tasks, a probing rebalance while copies still move). Without a group view (no
     * lags), or if the port fails, Kafka's StickyTaskAssignor; if even that fails, the previous owners keep their
     * tasks so the group runs.
     */
    private Decided fallback(ApplicationState applicationState, GroupView view, long now) {
        try {
            if (view == null) {
                throw new IllegalStateException("the group's lags are not available");
            }
            PlanConfigs configs = view.ownConfigs();
            LiveAssignment ha = HighAvailability.assign(view.group, configs, view.lags);
            Instant next = Followups.at(now, ha.followupRebalance(), configs.probingRebalanceIntervalMs(), settings);
            TaskAssignment assignment = view.toKafka(ha.assignment(), next);
            TaskAssignor.AssignmentError error = view.validate(assignment);
            if (error != TaskAssignor.AssignmentError.NONE) {
                throw new IllegalStateException("the KIP-441 fallback gave an invalid assignment: " + error);
            }
            LOG.info("KIP-441 fallback assignment (next rebalance: {})",
                    Followups.describe(ha.followupRebalance(), next));
            return new Decided(assignment, ha.assignment());
        } catch (Throwable t) {
            LOG.error("the KIP-441 fallback failed; using Kafka's StickyTaskAssignor", t);
        }
        try {
            return new Decided(lastFallback.assign(applicationState), null);
        } catch (Throwable t) {
            LOG.error("the sticky fallback failed too; keeping previous active tasks", t);
            return new Decided(lastResort(applicationState), null);
        }
    }

    /** Previous actives stay, new tasks go round-robin; reads the members without lags, which may be what failed. */
    static TaskAssignment lastResort(ApplicationState applicationState) {
        try {
            Map<ProcessId, KafkaStreamsState> states = new TreeMap<>(applicationState.kafkaStreamsStates(false));
            Map<ProcessId, KafkaStreamsAssignment> out = new TreeMap<>();
            for (ProcessId pid : states.keySet()) {
                out.put(pid, KafkaStreamsAssignment.of(pid, new HashSet<>()));
            }
            List<ProcessId> order = new ArrayList<>(states.keySet());
            int next = 0;
            for (TaskId task : new TreeSet<>(applicationState.allTasks().keySet())) {
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

    /**
     * Called once the consumer group assignment exists; reports are published here because only now the
     * members' ids, generations and subscription versions are known.
     */
    @Override
    public void onAssignmentComputed(GroupAssignment assignment, GroupSubscription subscription,
            AssignmentError error) {
        StateReports.Pending toSend = pending;
        pending = null;
        if (toSend != null && reporting != null) {
            reporting.publish(toSend, subscription, clock.getAsLong());
        }
    }
}
