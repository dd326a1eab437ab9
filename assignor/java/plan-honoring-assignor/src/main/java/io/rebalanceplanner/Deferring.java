package io.rebalanceplanner;

import io.rebalanceplanner.core.ClientTasks;
import io.rebalanceplanner.core.Deferral;
import io.rebalanceplanner.kafka.PlannerSettings;
import io.rebalanceplanner.kafka.SharedClients;
import java.time.Instant;
import java.util.Map;
import org.apache.kafka.streams.processor.assignment.TaskAssignor;
import org.apache.kafka.streams.processor.assignment.TaskAssignor.TaskAssignment;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Keeps a departed member's place while {@code rebalance.planner.scheduled.rebalance.max.delay.ms} runs
 * ({@link Deferral}). The leader remembers departures in this JVM's memory only.
 */
final class Deferring {
    private static final Logger LOG = LoggerFactory.getLogger(Deferring.class);

    private final PlannerSettings settings;

    Deferring(PlannerSettings settings) {
        this.settings = settings;
    }

    /**
     * The deferred assignment while departed members are within the delay, else {@code decided} unchanged.
     * What was assigned is remembered for the next rebalance this JVM leads; a memory older than the delay is
     * not trusted to tell who left just now (another leader may have run the group since).
     */
    Decided apply(GroupView view, Decided decided, long now) {
        if (settings.deferral().scheduledRebalanceMaxDelayMs() == 0 || view == null) {
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
            Map<String, Deferral.Departure> pending = Deferral.pending(previous, view.group, known, now, rules);
            if (pending.isEmpty() || previous == null) {
                SharedClients.remember(groupId, new SharedClients.Remembered(now, decided.tasks(), pending));
                return decided;
            }
            Deferral.Result deferral = Deferral.defer(previous, view.group,
                    view.lagIndex(view.own.acceptableRecoveryLag()), Map.of(), pending, now, rules);
            Instant checkAt = Followups.at(now, false, 0, settings);
            Instant deadline = Instant.ofEpochMilli(now + deferral.rebalanceInMs());
            Instant at = checkAt != null && checkAt.isBefore(deadline) ? checkAt : deadline;
            TaskAssignment assignment = view.toKafka(deferral.assignment().assignment(), at);
            TaskAssignor.AssignmentError error = view.validate(assignment);
            if (error != TaskAssignor.AssignmentError.NONE) {
                throw new IllegalStateException("the deferred assignment is invalid: " + error);
            }
            LOG.info("deferring: {} away, {} task(s) held, rebalancing in {} ms", pending.keySet(),
                    deferral.held().size(), deferral.rebalanceInMs());
            SharedClients.remember(groupId,
                    new SharedClients.Remembered(now, deferral.assignment().assignment(), pending));
            return new Decided(assignment, deferral.assignment().assignment());
        } catch (Throwable t) {
            LOG.error("deferral failed, assigning without it", t);
            SharedClients.remember(groupId, new SharedClients.Remembered(now, decided.tasks(), Map.of()));
            return decided;
        }
    }
}
