package io.rebalanceplanner.broker;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.NoSuchElementException;
import java.util.Set;
import java.util.TreeMap;
import org.apache.kafka.coordinator.group.api.streams.assignor.TopologyDescriber;

/** A fixed topology: subtopology id to partition count, and which subtopologies are stateful. */
record Topology(Map<String, Integer> partitions, Set<String> stateful) implements TopologyDescriber {
    Topology {
        partitions = new TreeMap<>(partitions);
        stateful = Set.copyOf(stateful);
    }

    @Override
    public List<String> subtopologies() {
        return new ArrayList<>(partitions.keySet());
    }

    @Override
    public int maxNumInputPartitions(String subtopologyId) {
        Integer n = partitions.get(subtopologyId);
        if (n == null) {
            throw new NoSuchElementException(subtopologyId);
        }
        return n;
    }

    @Override
    public boolean isStateful(String subtopologyId) {
        return stateful.contains(subtopologyId);
    }
}
