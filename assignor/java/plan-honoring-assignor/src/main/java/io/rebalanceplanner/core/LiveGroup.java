package io.rebalanceplanner.core;

import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.SortedSet;
import java.util.TreeSet;

/** The live group at one rebalance, as the honor rules see it (Kafka-free, like Python's GroupState). */
public final class LiveGroup {
    /** One application instance. */
    public static final class Client {
        private final String processId;
        private final int capacity;
        private final Set<Task> previousActive;
        private final Set<Task> previousStandby;
        private final Map<String, String> clientTags;

        public Client(String processId, int capacity, Set<Task> previousActive, Set<Task> previousStandby) {
            this(processId, capacity, previousActive, previousStandby, Map.of());
        }

        /** @param clientTags KIP-924's {@code clientTags()}, e.g. {@code zone=eu-1a} (read by the fallback only) */
        public Client(String processId, int capacity, Set<Task> previousActive, Set<Task> previousStandby,
                Map<String, String> clientTags) {
            this.processId = processId;
            this.capacity = capacity;
            this.previousActive = Set.copyOf(previousActive);
            this.previousStandby = Set.copyOf(previousStandby);
            this.clientTags = Map.copyOf(clientTags);
        }

        public String processId() {
            return processId;
        }

        public int capacity() {
            return capacity;
        }

        public Set<Task> previousActive() {
            return previousActive;
        }

        public Set<Task> previousStandby() {
            return previousStandby;
        }

        public Map<String, String> clientTags() {
            return clientTags;
        }
    }

    private final List<Client> clients;
    private final SortedSet<Task> statefulTasks;
    private final SortedSet<Task> statelessTasks;

    public LiveGroup(List<Client> clients, Set<Task> statefulTasks, Set<Task> statelessTasks) {
        this.clients = List.copyOf(clients);
        this.statefulTasks = Collections.unmodifiableSortedSet(new TreeSet<>(statefulTasks));
        this.statelessTasks = Collections.unmodifiableSortedSet(new TreeSet<>(statelessTasks));
    }

    public List<Client> clients() {
        return clients;
    }

    public SortedSet<Task> statefulTasks() {
        return statefulTasks;
    }

    public SortedSet<Task> statelessTasks() {
        return statelessTasks;
    }

    public SortedSet<Task> allTasks() {
        SortedSet<Task> all = new TreeSet<>(statefulTasks);
        all.addAll(statelessTasks);
        return all;
    }
}
