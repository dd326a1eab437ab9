package io.rebalanceplanner;

import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.SortedSet;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.UUID;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.streams.processor.TaskId;
import org.apache.kafka.streams.processor.assignment.ApplicationState;
import org.apache.kafka.streams.processor.assignment.AssignmentConfigs;
import org.apache.kafka.streams.processor.assignment.KafkaStreamsState;
import org.apache.kafka.streams.processor.assignment.ProcessId;
import org.apache.kafka.streams.processor.assignment.TaskInfo;
import org.apache.kafka.streams.processor.assignment.TaskTopicPartition;
import org.apache.kafka.streams.state.HostInfo;

/**
 * A hand-built KIP-924 ApplicationState: subtopology 0 stateless, subtopology 1 stateful. Lags are dense like
 * Kafka's: a stateful task a client was given no lag for lags the whole changelog ({@link #endOffsetSum}).
 */
final class FakeApplicationState implements ApplicationState {
    final Map<ProcessId, FakeClient> clients = new TreeMap<>();
    final Map<TaskId, TaskInfo> tasks = new TreeMap<>();
    boolean lagsExplode;
    long endOffsetSum = 10_000L;
    int numStandbyReplicas;
    List<String> rackAwareAssignmentTags = List.of();

    FakeApplicationState(int partitions) {
        for (int p = 0; p < partitions; p++) {
            tasks.put(new TaskId(0, p), new Info(new TaskId(0, p), false, "input", null));
            tasks.put(new TaskId(1, p), new Info(new TaskId(1, p), true, "app-repartition", "app-store-changelog"));
        }
    }

    FakeClient client(String uuid) {
        FakeClient c = new FakeClient(new ProcessId(UUID.fromString(uuid)));
        clients.put(c.processId(), c);
        return c;
    }

    @Override
    public Map<ProcessId, KafkaStreamsState> kafkaStreamsStates(boolean computeTaskLags) {
        Map<ProcessId, KafkaStreamsState> out = new HashMap<>();
        for (FakeClient c : clients.values()) {
            out.put(c.processId(), computeTaskLags ? c : c.withoutLags());
        }
        return out;
    }

    @Override
    public AssignmentConfigs assignmentConfigs() {
        return new AssignmentConfigs(100L, 2, numStandbyReplicas, 600000L, rackAwareAssignmentTags, 10, 1, "none");
    }

    @Override
    public Map<TaskId, TaskInfo> allTasks() {
        return tasks;
    }

    final class FakeClient implements KafkaStreamsState {
        private final ProcessId pid;
        final SortedSet<TaskId> previousActive = new TreeSet<>();
        final SortedSet<TaskId> previousStandby = new TreeSet<>();
        final Map<TaskId, Long> lags = new HashMap<>();
        Map<String, String> tags = Map.of("zone", "z1");
        private final boolean withLags;

        FakeClient(ProcessId pid) {
            this(pid, true);
        }

        private FakeClient(ProcessId pid, boolean withLags) {
            this.pid = pid;
            this.withLags = withLags;
        }

        FakeClient withoutLags() {
            FakeClient c = new FakeClient(pid, false);
            c.previousActive.addAll(previousActive);
            c.previousStandby.addAll(previousStandby);
            c.tags = tags;
            return c;
        }

        @Override
        public ProcessId processId() {
            return pid;
        }

        @Override
        public int numProcessingThreads() {
            return 1;
        }

        @Override
        public SortedSet<String> consumerClientIds() {
            return new TreeSet<>(Set.of(pid.id() + "-StreamThread-1-consumer"));
        }

        @Override
        public SortedSet<TaskId> previousActiveTasks() {
            return previousActive;
        }

        @Override
        public SortedSet<TaskId> previousStandbyTasks() {
            return previousStandby;
        }

        @Override
        public long lagFor(TaskId task) {
            return statefulTasksToLagSums().get(task);
        }

        @Override
        public SortedSet<TaskId> prevTasksByLag(String consumerClientId) {
            return new TreeSet<>(previousActive);
        }

        @Override
        public Map<TaskId, Long> statefulTasksToLagSums() {
            if (!withLags) {
                throw new UnsupportedOperationException("lags were not requested");
            }
            if (lagsExplode) {
                throw new IllegalStateException("Tried to lookup lag for unknown task 1_0");
            }
            Map<TaskId, Long> dense = new HashMap<>();
            for (TaskInfo info : tasks.values()) {
                if (info.isStateful()) {
                    dense.put(info.id(), lags.getOrDefault(info.id(), endOffsetSum));
                }
            }
            return dense;
        }

        @Override
        public Optional<HostInfo> hostInfo() {
            return Optional.of(new HostInfo("host-" + pid.id().toString().substring(0, 4), 8080));
        }

        @Override
        public Map<String, String> clientTags() {
            return tags;
        }

        @Override
        public Optional<String> rackId() {
            return Optional.empty();
        }
    }

    private static final class Info implements TaskInfo {
        private final TaskId id;
        private final boolean stateful;
        private final Set<TaskTopicPartition> partitions = new java.util.HashSet<>();

        Info(TaskId id, boolean stateful, String source, String changelog) {
            this.id = id;
            this.stateful = stateful;
            partitions.add(new Part(new TopicPartition(source, id.partition()), true, false));
            if (changelog != null) {
                partitions.add(new Part(new TopicPartition(changelog, id.partition()), false, true));
            }
        }

        @Override
        public TaskId id() {
            return id;
        }

        @Override
        public boolean isStateful() {
            return stateful;
        }

        @Override
        public Set<String> stateStoreNames() {
            return stateful ? Set.of("store") : Set.of();
        }

        @Override
        public Set<TaskTopicPartition> topicPartitions() {
            return partitions;
        }
    }

    private static final class Part implements TaskTopicPartition {
        private final TopicPartition tp;
        private final boolean source;
        private final boolean changelog;

        Part(TopicPartition tp, boolean source, boolean changelog) {
            this.tp = tp;
            this.source = source;
            this.changelog = changelog;
        }

        @Override
        public TopicPartition topicPartition() {
            return tp;
        }

        @Override
        public boolean isSource() {
            return source;
        }

        @Override
        public boolean isChangelog() {
            return changelog;
        }

        @Override
        public Optional<Set<String>> rackIds() {
            return Optional.empty();
        }
    }
}
