package io.rebalanceplanner.broker;

import io.rebalanceplanner.core.Task;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import org.apache.kafka.coordinator.group.api.streams.assignor.GroupAssignment;
import org.apache.kafka.coordinator.group.api.streams.assignor.GroupSpec;
import org.apache.kafka.coordinator.group.api.streams.assignor.MemberAssignment;
import org.apache.kafka.coordinator.group.api.streams.assignor.TopologyDescriber;

/** Last checks on what goes back to the broker, and the assignment of last resort. */
final class AssignmentCheck {
    private AssignmentCheck() {}

    /**
     * Every member present, every task active exactly once, no process holding a task twice, standbys only of
     * stateful tasks: a bug in our code must fall back to sticky, not reach the group.
     */
    static void requireValid(GroupSpec spec, GroupView view, GroupAssignment assignment) {
        Map<String, MemberAssignment> members = assignment.members();
        if (!members.keySet().equals(new HashSet<>(spec.memberIds()))) {
            throw new IllegalStateException("the assignment's members differ from the group's");
        }
        Map<Task, Integer> actives = new HashMap<>();
        for (Map.Entry<String, List<String>> process : view.membersByProcess.entrySet()) {
            Set<Task> held = new HashSet<>();
            for (String m : process.getValue()) {
                MemberAssignment a = members.get(m);
                for (Task t : tasks(a.activeTasks(), view)) {
                    actives.merge(t, 1, Integer::sum);
                    if (!held.add(t)) {
                        throw new IllegalStateException("process " + process.getKey() + " holds " + t + " twice");
                    }
                }
                for (Task t : tasks(a.standbyTasks(), view)) {
                    if (!view.group.statefulTasks().contains(t)) {
                        throw new IllegalStateException("standby of a task that is not stateful: " + t);
                    }
                    if (!held.add(t)) {
                        throw new IllegalStateException("process " + process.getKey() + " holds " + t + " twice");
                    }
                }
            }
        }
        Set<Task> all = view.group.allTasks();
        if (!actives.keySet().equals(all)) {
            throw new IllegalStateException("the assignment's active tasks differ from the group's tasks");
        }
        for (Map.Entry<Task, Integer> e : actives.entrySet()) {
            if (e.getValue() != 1) {
                throw new IllegalStateException("task " + e.getKey() + " is active " + e.getValue() + " times");
            }
        }
    }

    private static List<Task> tasks(Map<String, Set<Integer>> bySubtopology, GroupView view) {
        List<Task> out = new ArrayList<>();
        for (Map.Entry<String, Set<Integer>> e : bySubtopology.entrySet()) {
            Long number = view.subtopologyNumbers.get(e.getKey());
            if (number == null) {
                throw new IllegalStateException("subtopology id " + e.getKey() + " in our own assignment");
            }
            for (Integer p : e.getValue()) {
                out.add(new Task(number, p));
            }
        }
        return out;
    }

    /**
     * When even Kafka's sticky assignor throws, or the group is beyond the bounds in which sticky finishes quickly:
     * each member keeps the actives it runs (first claim wins), the other tasks go round-robin in member order (at
     * most {@link GroupView#MAX_TASKS}); no standbys. The group keeps processing.
     */
    static GroupAssignment lastResort(GroupSpec spec, TopologyDescriber topology) {
        List<String> members = new ArrayList<>(new TreeSet<>(spec.memberIds()));
        Map<String, Map<String, Set<Integer>>> active = new HashMap<>();
        Map<String, String> owner = new HashMap<>();
        for (String m : members) {
            active.put(m, new HashMap<>());
            Map<String, Set<Integer>> held = spec.memberAssignmentState(m).activeTasks();
            if (held == null) {
                continue;
            }
            held.forEach((sub, partitions) -> {
                if (sub != null && partitions != null) {
                    for (Integer p : partitions) {
                        owner.putIfAbsent(sub + "\u0000" + p, m);
                    }
                }
            });
        }
        try {
            int next = 0;
            int budget = GroupView.MAX_TASKS;
            for (String sub : topology.subtopologies()) {
                int partitions = Math.min(Math.max(0, topology.maxNumInputPartitions(sub)), budget);
                budget -= partitions;
                for (int p = 0; p < partitions; p++) {
                    String m = owner.get(sub + "\u0000" + p);
                    if (m == null) {
                        m = members.get(next++ % members.size());
                    }
                    active.get(m).computeIfAbsent(sub, k -> new TreeSet<>()).add(p);
                }
            }
        } catch (RuntimeException e) {
            // The topology cannot be read: members keep exactly what they run, nothing is added.
            active.replaceAll((m, tasks) -> new HashMap<>());
            for (Map.Entry<String, String> held : owner.entrySet()) {
                String[] parts = held.getKey().split("\u0000", 2);
                active.get(held.getValue()).computeIfAbsent(parts[0], k -> new TreeSet<>())
                        .add(Integer.parseInt(parts[1]));
            }
        }
        Map<String, MemberAssignment> out = new HashMap<>();
        for (String m : members) {
            out.put(m, new MemberAssignment(active.get(m), Map.of()));
        }
        return new GroupAssignment(out);
    }
}
