package io.rebalanceplanner;

import io.rebalanceplanner.core.ClientTasks;
import io.rebalanceplanner.core.CodePoints;
import io.rebalanceplanner.core.LagIndex;
import io.rebalanceplanner.core.LiveGroup;
import io.rebalanceplanner.core.PlanConfigs;
import io.rebalanceplanner.core.Task;
import java.time.Instant;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.apache.kafka.streams.processor.TaskId;
import org.apache.kafka.streams.processor.assignment.ApplicationState;
import org.apache.kafka.streams.processor.assignment.AssignmentConfigs;
import org.apache.kafka.streams.processor.assignment.KafkaStreamsAssignment;
import org.apache.kafka.streams.processor.assignment.KafkaStreamsAssignment.AssignedTask;
import org.apache.kafka.streams.processor.assignment.KafkaStreamsState;
import org.apache.kafka.streams.processor.assignment.ProcessId;
import org.apache.kafka.streams.processor.assignment.TaskAssignmentUtils;
import org.apache.kafka.streams.processor.assignment.TaskAssignor;
import org.apache.kafka.streams.processor.assignment.TaskAssignor.TaskAssignment;
import org.apache.kafka.streams.processor.assignment.TaskInfo;

/**
 * One rebalance's group as Kafka describes it, read once per {@code assign}: the members with their lags, the
 * tasks, the application's own settings, and the way back from our assignments to Kafka's.
 */
final class GroupView {
    final ApplicationState app;
    final Map<ProcessId, KafkaStreamsState> states;
    final Map<TaskId, TaskInfo> tasks;
    final AssignmentConfigs own;
    final LiveGroup group;
    /** Lags exactly as Kafka computed them, by process id: -2 running active, -3 unknown, else end - checkpoint. */
    final Map<String, Map<Task, Long>> lags;
    /** Process ids in code-point order, the order every lag index uses. */
    final List<String> pids;

    private GroupView(ApplicationState app, Map<ProcessId, KafkaStreamsState> states, Map<TaskId, TaskInfo> tasks,
            AssignmentConfigs own) {
        this.app = app;
        this.states = states;
        this.tasks = tasks;
        this.own = own;
        this.group = liveGroup(states, tasks);
        this.lags = lagsOf(states);
        List<String> sorted = new ArrayList<>();
        for (LiveGroup.Client c : group.clients()) {
            sorted.add(c.processId());
        }
        sorted.sort(CodePoints.ORDER);
        this.pids = List.copyOf(sorted);
    }

    /** Reads the group; throws if Kafka cannot give the members' lags (the caller falls back without them). */
    static GroupView of(ApplicationState app) {
        return new GroupView(app, app.kafkaStreamsStates(true), app.allTasks(), app.assignmentConfigs());
    }

    /** The application's own KIP-441 settings, as the fallback and the reports use them. */
    PlanConfigs ownConfigs() {
        return new PlanConfigs(own.acceptableRecoveryLag(), own.maxWarmupReplicas(), own.numStandbyReplicas(),
                own.probingRebalanceIntervalMs(), own.rackAwareAssignmentTags());
    }

    LagIndex lagIndex(long acceptableRecoveryLag) {
        return new LagIndex(pids, lags, Map.of(), acceptableRecoveryLag);
    }

    /** Kafka's verdict on an assignment for this group: NONE when every task is placed once and legally. */
    TaskAssignor.AssignmentError validate(TaskAssignment assignment) {
        return TaskAssignmentUtils.validateTaskAssignment(app, assignment);
    }

    /** Warmups become standby tasks: KIP-924 has no separate role, a standby that catches up is a warmup. */
    TaskAssignment toKafka(Map<String, ClientTasks> assigned, Instant followupAt) {
        Map<String, ProcessId> byName = new HashMap<>();
        for (ProcessId pid : states.keySet()) {
            byName.put(pid.id().toString(), pid);
        }
        Map<Task, TaskId> kafkaIds = new HashMap<>();
        List<KafkaStreamsAssignment> out = new ArrayList<>();
        boolean followupSet = false;
        for (Map.Entry<String, ClientTasks> e : assigned.entrySet()) {
            ProcessId pid = byName.get(e.getKey());
            Set<AssignedTask> roles = new HashSet<>();
            for (Task t : e.getValue().active()) {
                roles.add(new AssignedTask(kafkaId(kafkaIds, t), AssignedTask.Type.ACTIVE));
            }
            for (Task t : e.getValue().standby()) {
                roles.add(new AssignedTask(kafkaId(kafkaIds, t), AssignedTask.Type.STANDBY));
            }
            for (Task t : e.getValue().warmup()) {
                roles.add(new AssignedTask(kafkaId(kafkaIds, t), AssignedTask.Type.STANDBY));
            }
            KafkaStreamsAssignment a = KafkaStreamsAssignment.of(pid, roles);
            if (followupAt != null && !followupSet) {
                // One member asking for the probing rebalance is enough; Kafka's own assignor does the same.
                a = a.withFollowupRebalance(followupAt);
                followupSet = true;
            }
            out.add(a);
        }
        return new TaskAssignment(out);
    }

    static Task task(TaskId id) {
        return new Task(id.subtopology(), id.partition());
    }

    private static Map<String, Map<Task, Long>> lagsOf(Map<ProcessId, KafkaStreamsState> states) {
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

    private static LiveGroup liveGroup(Map<ProcessId, KafkaStreamsState> states, Map<TaskId, TaskInfo> tasks) {
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

    private static TaskId kafkaId(Map<Task, TaskId> cache, Task t) {
        return cache.computeIfAbsent(t, k -> new TaskId(Math.toIntExact(k.subtopology()),
                Math.toIntExact(k.partition())));
    }
}
