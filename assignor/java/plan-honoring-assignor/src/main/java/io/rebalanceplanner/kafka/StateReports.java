package io.rebalanceplanner.kafka;

import io.rebalanceplanner.core.CanonicalJson;
import io.rebalanceplanner.core.ClientTasks;
import io.rebalanceplanner.core.Task;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.UUID;
import org.apache.kafka.clients.consumer.ConsumerPartitionAssignor.GroupSubscription;
import org.apache.kafka.clients.consumer.ConsumerPartitionAssignor.Subscription;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.streams.processor.TaskId;
import org.apache.kafka.streams.processor.assignment.AssignmentConfigs;
import org.apache.kafka.streams.processor.assignment.KafkaStreamsAssignment;
import org.apache.kafka.streams.processor.assignment.KafkaStreamsAssignment.AssignedTask;
import org.apache.kafka.streams.processor.assignment.KafkaStreamsState;
import org.apache.kafka.streams.processor.assignment.ProcessId;
import org.apache.kafka.streams.processor.assignment.TaskAssignor.TaskAssignment;
import org.apache.kafka.streams.processor.assignment.TaskInfo;
import org.apache.kafka.streams.processor.assignment.TaskTopicPartition;

/** State reports (schemas/state_report.schema.json) the group leader publishes for every member. */
public final class StateReports {
    private StateReports() {}

    /** Everything about one rebalance but the members' group metadata, which arrives after assign(). */
    public static final class Pending {
        private final String groupId;
        private final List<Map<String, Object>> reports;
        private final Map<String, Collection<String>> clientIds;

        Pending(String groupId, List<Map<String, Object>> reports, Map<String, Collection<String>> clientIds) {
            this.groupId = groupId;
            this.reports = reports;
            this.clientIds = clientIds;
        }

        /** Sets a field of every member's report (e.g. when the group rebalances next), beside the rest. */
        public void putEverywhere(String field, Object value) {
            for (Map<String, Object> report : reports) {
                report.put(field, value);
            }
        }

        /** Key {@code <group>/<process id>} to the report's JSON bytes. */
        public Map<String, byte[]> records(GroupSubscription subscription, long nowMs) {
            Map<String, MemberInfo> members = members(subscription);
            long generation = currentGeneration(members.values());
            Map<String, byte[]> out = new LinkedHashMap<>();
            for (Map<String, Object> template : reports) {
                Map<String, Object> report = new TreeMap<>(template);
                String pid = (String) report.get("process_id");
                MemberInfo member = members.get(pid);
                report.put("member_id", member == null ? "" : member.memberId);
                report.put("generation", member == null ? -1L : generation);
                report.put("protocol_version", member == null || member.version < 1 ? 1L : member.version);
                Collection<String> ids = clientIds.getOrDefault(pid, List.of());
                report.put("client_id", ids.isEmpty() ? "" : ids.iterator().next());
                report.put("reported_at", nowMs);
                out.put(groupId + "/" + pid, CanonicalJson.bytes(report));
            }
            return out;
        }
    }

    /**
     * The generation this assignment starts: members subscribe with the generation they joined last, and the
     * classic protocol bumps it once per join round, so it is one past the newest; -1 when no member has one.
     */
    static long currentGeneration(Collection<MemberInfo> members) {
        long newest = -1;
        for (MemberInfo m : members) {
            newest = Math.max(newest, m.generation);
        }
        return newest < 0 ? -1 : newest + 1;
    }

    private static final class MemberInfo {
        final String memberId;
        final long generation;
        final long version;

        MemberInfo(String memberId, long generation, long version) {
            this.memberId = memberId;
            this.generation = generation;
            this.version = version;
        }
    }

    /**
     * Member id, generation and Streams subscription version per process id. The process id and version are
     * the first fields of Kafka Streams' subscription user data: int32 version, then (from version 3 on) an
     * int32 latest supported version, then the process UUID.
     */
    static Map<String, MemberInfo> members(GroupSubscription subscription) {
        Map<String, MemberInfo> out = new HashMap<>();
        if (subscription == null) {
            return out;
        }
        for (String memberId : new TreeSet<>(subscription.groupSubscription().keySet())) {
            Subscription s = subscription.groupSubscription().get(memberId);
            ByteBuffer data = s.userData();
            if (data == null) {
                continue;
            }
            ByteBuffer buf = data.duplicate();
            buf.rewind();
            if (buf.remaining() < 4) {
                continue;
            }
            int version = buf.getInt();
            if (version >= 3) {
                if (buf.remaining() < 4) {
                    continue;
                }
                buf.getInt();
            }
            if (buf.remaining() < 16) {
                continue;
            }
            String pid = new UUID(buf.getLong(), buf.getLong()).toString();
            long generation = s.generationId().map(Integer::longValue).orElse(-1L);
            out.putIfAbsent(pid, new MemberInfo(memberId, generation, version));
        }
        return out;
    }

    /**
     * The reports of one rebalance. With {@code endOffsetSums} (per stateful task, listed just now) each client's
     * offset sums are derived from its lags, for every task it has state for; without them the reports carry
     * lags only and {@code offsetSumsError} says why.
     */
    public static Pending pending(String groupId, Map<ProcessId, KafkaStreamsState> states,
            Map<TaskId, TaskInfo> tasks, AssignmentConfigs own, TaskAssignment assignment,
            Map<String, ClientTasks> withWarmups, Map<String, Map<Task, Long>> lags, Map<Task, Long> endOffsetSums,
            String offsetSumsError, String planId, String fallbackReason, long nowMs) {
        Map<String, Object> topology = topology(tasks);
        Map<String, Object> ownSettings = settings(own);
        Map<String, KafkaStreamsAssignment> byPid = new HashMap<>();
        for (KafkaStreamsAssignment a : assignment.assignment()) {
            byPid.put(a.processId().id().toString(), a);
        }
        List<Map<String, Object>> reports = new ArrayList<>();
        Map<String, Collection<String>> clientIds = new HashMap<>();
        for (Map.Entry<ProcessId, KafkaStreamsState> e : new TreeMap<>(states).entrySet()) {
            String pid = e.getKey().id().toString();
            KafkaStreamsState s = e.getValue();
            Map<String, Object> r = new TreeMap<>();
            r.put("schema_version", 1L);
            r.put("origin", "kafka-streams");
            // The plugin is a KIP-924 assignor: it runs in classic-protocol groups (streams groups assign on the broker).
            r.put("protocol", "classic");
            r.put("settings", ownSettings);
            r.put("group_id", groupId);
            r.put("process_id", pid);
            r.put("host", s.hostInfo().map(h -> h.host() + ":" + h.port()).orElse(""));
            r.put("capacity", (long) s.numProcessingThreads());
            r.put("client_tags", new TreeMap<>(s.clientTags()));
            TreeSet<Task> active = new TreeSet<>();
            TreeSet<Task> standby = new TreeSet<>();
            TreeSet<Task> warmup = new TreeSet<>();
            KafkaStreamsAssignment a = byPid.get(pid);
            if (a != null) {
                for (AssignedTask t : a.tasks().values()) {
                    Task task = new Task(t.id().subtopology(), t.id().partition());
                    (t.type() == AssignedTask.Type.ACTIVE ? active : standby).add(task);
                }
            }
            // Kafka only knows standbys; our own assignors (honoring or the KIP-441 fallback) say which are warmups.
            ClientTasks mine = withWarmups == null ? null : withWarmups.get(pid);
            if (mine != null) {
                standby.removeAll(mine.warmup());
                warmup.addAll(mine.warmup());
            }
            r.put("active_tasks", names(active));
            r.put("standby_tasks", names(standby));
            r.put("warmup_tasks", names(warmup));
            Map<String, Object> taskLags = new TreeMap<>();
            Map<Task, Long> clientLags = lags == null ? null : lags.get(pid);
            if (clientLags != null) {
                for (Map.Entry<Task, Long> lag : new TreeMap<>(clientLags).entrySet()) {
                    taskLags.put(lag.getKey().toString(), lag.getValue());
                }
            }
            r.put("task_lags", taskLags);
            Map<String, Object> sums = new TreeMap<>();
            if (endOffsetSums != null && clientLags != null) {
                offsetSums(clientLags, endOffsetSums).forEach((t, sum) -> sums.put(t.toString(), sum));
            } else if (offsetSumsError != null) {
                r.put("task_offset_sums_error", offsetSumsError);
            }
            r.put("task_offset_sums", sums);
            r.put("topology", topology);
            r.put("plan_id", planId);
            r.put("fallback_reason", fallbackReason);
            reports.add(r);
            clientIds.put(pid, s.consumerClientIds());
        }
        return new Pending(groupId, reports, clientIds);
    }

    /**
     * Offset sums from Kafka's lags ({@code end - offset sum}, sentinels as they are) and end offsets listed a
     * moment later: a task lagging its whole changelog has no state and no sum. Records appended between the two
     * listings make a sum slightly too high; the pipeline's acceptable lag dwarfs that.
     */
    static Map<Task, Long> offsetSums(Map<Task, Long> lags, Map<Task, Long> endOffsetSums) {
        Map<Task, Long> out = new TreeMap<>();
        for (Map.Entry<Task, Long> e : lags.entrySet()) {
            long lag = e.getValue();
            Long end = endOffsetSums.get(e.getKey());
            if (lag == -2 || lag == -3) {
                out.put(e.getKey(), lag);
            } else if (end != null && lag >= 0 && lag < end) {
                out.put(e.getKey(), end - lag);
            }
        }
        return out;
    }

    /** Every changelog partition of the application's stateful tasks. */
    public static Set<TopicPartition> changelogPartitions(Map<TaskId, TaskInfo> tasks) {
        Set<TopicPartition> out = new HashSet<>();
        for (TaskInfo info : tasks.values()) {
            for (TaskTopicPartition tp : info.topicPartitions()) {
                if (tp.isChangelog()) {
                    out.add(tp.topicPartition());
                }
            }
        }
        return out;
    }

    /** Per stateful task, the sum of its changelog partitions' end offsets; a task with one unlisted is left out. */
    public static Map<Task, Long> endOffsetSums(Map<TaskId, TaskInfo> tasks, Map<TopicPartition, Long> ends) {
        Map<Task, Long> out = new HashMap<>();
        for (TaskInfo info : tasks.values()) {
            long sum = 0;
            boolean changelog = false;
            boolean complete = true;
            for (TaskTopicPartition tp : info.topicPartitions()) {
                if (tp.isChangelog()) {
                    changelog = true;
                    Long end = ends.get(tp.topicPartition());
                    complete &= end != null;
                    sum += end == null ? 0 : end;
                }
            }
            if (changelog && complete) {
                out.put(new Task(info.id().subtopology(), info.id().partition()), sum);
            }
        }
        return out;
    }

    /**
     * The application's own KIP-441 settings, as its configuration gives them to the assignor (whatever a plan
     * says): the pipeline plans the group with these and flags a plan that would change them.
     */
    static Map<String, Object> settings(AssignmentConfigs configs) {
        Map<String, Object> out = new TreeMap<>();
        out.put("acceptable_recovery_lag", configs.acceptableRecoveryLag());
        out.put("max_warmup_replicas", (long) configs.maxWarmupReplicas());
        out.put("num_standby_replicas", (long) configs.numStandbyReplicas());
        out.put("probing_rebalance_interval_ms", configs.probingRebalanceIntervalMs());
        out.put("rack_aware_assignment_tags", new ArrayList<>(configs.rackAwareAssignmentTags()));
        return out;
    }

    private static List<String> names(Collection<Task> tasks) {
        List<String> out = new ArrayList<>();
        for (Task t : tasks) {
            out.add(t.toString());
        }
        return out;
    }

    static Map<String, Object> topology(Map<TaskId, TaskInfo> tasks) {
        Map<Integer, TreeSet<String>> sources = new TreeMap<>();
        Map<Integer, TreeSet<String>> changelogs = new TreeMap<>();
        Map<Integer, Boolean> stateful = new TreeMap<>();
        for (TaskInfo info : tasks.values()) {
            int sub = info.id().subtopology();
            TreeSet<String> src = sources.computeIfAbsent(sub, k -> new TreeSet<>());
            TreeSet<String> chg = changelogs.computeIfAbsent(sub, k -> new TreeSet<>());
            stateful.merge(sub, info.isStateful(), Boolean::logicalOr);
            for (TaskTopicPartition tp : info.topicPartitions()) {
                if (tp.isSource()) {
                    src.add(tp.topicPartition().topic());
                }
                if (tp.isChangelog()) {
                    chg.add(tp.topicPartition().topic());
                }
            }
        }
        Map<String, Object> out = new TreeMap<>();
        for (Integer sub : sources.keySet()) {
            Map<String, Object> entry = new TreeMap<>();
            entry.put("source_topics", new ArrayList<>(sources.get(sub)));
            entry.put("changelog_topics", new ArrayList<>(changelogs.get(sub)));
            entry.put("stateful", stateful.get(sub));
            out.put(String.valueOf(sub), entry);
        }
        return out;
    }

}
