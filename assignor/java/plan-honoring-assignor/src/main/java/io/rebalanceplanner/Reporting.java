package io.rebalanceplanner;

import io.rebalanceplanner.core.Task;
import io.rebalanceplanner.kafka.EndOffsetSource;
import io.rebalanceplanner.kafka.EndOffsetsUnavailableException;
import io.rebalanceplanner.kafka.PlannerSettings;
import io.rebalanceplanner.kafka.ReportSink;
import io.rebalanceplanner.kafka.StateReports;
import java.time.Instant;
import java.util.Map;
import org.apache.kafka.clients.consumer.ConsumerPartitionAssignor.GroupSubscription;
import org.apache.kafka.streams.processor.TaskId;
import org.apache.kafka.streams.processor.assignment.ApplicationState;
import org.apache.kafka.streams.processor.assignment.KafkaStreamsAssignment;
import org.apache.kafka.streams.processor.assignment.KafkaStreamsState;
import org.apache.kafka.streams.processor.assignment.ProcessId;
import org.apache.kafka.streams.processor.assignment.TaskAssignor.TaskAssignment;
import org.apache.kafka.streams.processor.assignment.TaskInfo;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The members' state reports: prepared when the assignment is decided, published once the consumer group
 * assignment exists (only then are the members' ids, generations and subscription versions known).
 */
final class Reporting {
    private static final Logger LOG = LoggerFactory.getLogger(Reporting.class);

    private final PlannerSettings settings;
    private final ReportSink sink;
    private final EndOffsetSource endOffsets;

    Reporting(PlannerSettings settings, ReportSink sink, EndOffsetSource endOffsets) {
        this.settings = settings;
        this.sink = sink;
        this.endOffsets = endOffsets;
    }

    /**
     * The reports of this rebalance. Without a group view (Kafka could not give lags) the members are read
     * without lags and the reports carry none.
     */
    StateReports.Pending prepare(ApplicationState app, GroupView view, Decided result, String planId,
            String fallbackReason, long now) {
        Map<Task, Long> endOffsetSums = null;
        String offsetSumsError = null;
        if (endOffsets == null) {
            offsetSumsError = PlannerSettings.OFFSETS_TIMEOUT_MS + " is 0: lags only";
        } else if (view != null) {
            try {
                endOffsetSums = StateReports.endOffsetSums(view.tasks, endOffsets.endOffsets(
                        StateReports.changelogPartitions(view.tasks), settings.offsetsTimeoutMs()));
            } catch (EndOffsetsUnavailableException e) {
                offsetSumsError = e.getMessage();
                LOG.warn("reporting lags without offset sums: {}", offsetSumsError);
            }
        }
        Map<ProcessId, KafkaStreamsState> states = view != null ? view.states : app.kafkaStreamsStates(false);
        Map<TaskId, TaskInfo> tasks = view != null ? view.tasks : app.allTasks();
        StateReports.Pending pending = StateReports.pending(settings.applicationId(), states, tasks,
                app.assignmentConfigs(), result.assignment(), result.tasks(), view != null ? view.lags : null,
                endOffsetSums, offsetSumsError, planId, fallbackReason, now);
        // What `rebalance-planner status` tells people: when this group looks at the plans topic again.
        pending.putEverywhere("next_rebalance_at", nextRebalanceAt(result.assignment()));
        pending.putEverywhere("plan_check_interval_ms", settings.planCheckIntervalMs());
        return pending;
    }

    /** Publishes prepared reports; a failure is logged, never thrown into the rebalance. */
    void publish(StateReports.Pending pending, GroupSubscription subscription, long nowMs) {
        try {
            sink.publish(pending.records(subscription, nowMs));
        } catch (Throwable t) {
            LOG.warn("state reports were not published: {}", t.toString());
        }
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
}
