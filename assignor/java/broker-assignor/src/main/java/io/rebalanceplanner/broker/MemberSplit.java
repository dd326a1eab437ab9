package io.rebalanceplanner.broker;

import io.rebalanceplanner.core.ClientTasks;
import io.rebalanceplanner.core.Task;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import org.apache.kafka.coordinator.group.api.streams.assignor.GroupAssignment;
import org.apache.kafka.coordinator.group.api.streams.assignor.GroupSpec;
import org.apache.kafka.coordinator.group.api.streams.assignor.MemberAssignment;
import org.apache.kafka.coordinator.group.api.streams.assignor.MemberAssignmentState;

/**
 * A process's tasks spread over its members (its stream threads): a task stays on the member that has it while
 * that member is under its share, the rest go to the least-loaded member. Warm-ups become standbys: the 4.4
 * broker has no warm-up role for custom assignors, and a standby that catches up is exactly a warm-up.
 */
final class MemberSplit {
    private MemberSplit() {}

    static GroupAssignment toKafka(GroupSpec spec, GroupView view, Map<String, ClientTasks> byProcess) {
        Map<String, MemberAssignment> out = new HashMap<>();
        for (Map.Entry<String, List<String>> e : view.membersByProcess.entrySet()) {
            List<String> members = e.getValue();
            ClientTasks tasks = byProcess.get(e.getKey());
            if (members.size() == 1) {
                // One stream thread (Kafka Streams' default): the process's tasks are the member's.
                Set<Task> replicas = new TreeSet<>(tasks.standby());
                replicas.addAll(tasks.warmup());
                out.put(members.get(0), new MemberAssignment(bySubtopology(tasks.active(), view),
                        bySubtopology(replicas, view)));
                continue;
            }
            Loads loads = new Loads(members, view);
            Map<Task, String> previousActive = new HashMap<>();
            Map<Task, String> previousStandby = new HashMap<>();
            for (String m : members) {
                MemberAssignmentState state = spec.memberAssignmentState(m);
                remember(previousActive, state.activeTasks(), m, view);
                remember(previousStandby, state.standbyTasks(), m, view);
                remember(previousStandby, state.warmupTasks(), m, view);
            }
            Set<Task> replicas = new TreeSet<>(tasks.standby());
            replicas.addAll(tasks.warmup());
            int n = members.size();
            loads.spread(tasks.active(), previousActive, (tasks.active().size() + n - 1) / n, true);
            loads.spread(replicas, previousStandby, (tasks.active().size() + replicas.size() + n - 1) / n, false);
            for (String m : members) {
                out.put(m, new MemberAssignment(loads.active.get(m), loads.standby.get(m)));
            }
        }
        return new GroupAssignment(out);
    }

    /** One process's members while its tasks are placed: what each holds and how loaded it is. */
    private static final class Loads {
        final List<String> members;
        final GroupView view;
        final Map<String, Map<String, Set<Integer>>> active = new HashMap<>();
        final Map<String, Map<String, Set<Integer>>> standby = new HashMap<>();
        final Map<String, Integer> activeLoad = new HashMap<>();
        final Map<String, Integer> totalLoad = new HashMap<>();

        Loads(List<String> members, GroupView view) {
            this.members = members;
            this.view = view;
            for (String m : members) {
                active.put(m, new HashMap<>());
                standby.put(m, new HashMap<>());
                activeLoad.put(m, 0);
                totalLoad.put(m, 0);
            }
        }

        /**
         * Two passes: the tasks that stay on the member running them (while it is under its share) first, then the
         * rest on the least-loaded member; actives balance on active load, standbys on total load.
         */
        void spread(Set<Task> tasks, Map<Task, String> previous, int share, boolean asActive) {
            Map<String, Integer> counted = asActive ? activeLoad : totalLoad;
            List<Task> moving = new ArrayList<>();
            for (Task t : tasks) {
                String m = previous.get(t);
                if (m == null || counted.get(m) >= share) {
                    moving.add(t);
                } else {
                    put(m, t, asActive);
                }
            }
            for (Task t : moving) {
                put(asActive ? leastLoaded(members, activeLoad, totalLoad) : leastLoaded(members, totalLoad,
                        activeLoad), t, asActive);
            }
        }

        private void put(String member, Task t, boolean asActive) {
            place(asActive ? active : standby, member, t, view);
            if (asActive) {
                activeLoad.merge(member, 1, Integer::sum);
            }
            totalLoad.merge(member, 1, Integer::sum);
        }
    }

    private static Map<String, Set<Integer>> bySubtopology(Set<Task> tasks, GroupView view) {
        Map<String, Set<Integer>> out = new HashMap<>();
        for (Task t : tasks) {
            out.computeIfAbsent(view.subtopologyIds.get(t.subtopology()), k -> new TreeSet<>()).add((int) t.partition());
        }
        return out;
    }

    private static String leastLoaded(List<String> members, Map<String, Integer> first, Map<String, Integer> second) {
        String best = null;
        for (String m : members) {
            if (best == null) {
                best = m;
                continue;
            }
            int c = Integer.compare(first.get(m), first.get(best));
            if (c == 0) {
                c = Integer.compare(second.get(m), second.get(best));
            }
            if (c < 0) {
                best = m;
            }
        }
        return best;
    }

    private static void place(Map<String, Map<String, Set<Integer>>> into, String member, Task t, GroupView view) {
        into.get(member).computeIfAbsent(view.subtopologyIds.get(t.subtopology()), k -> new TreeSet<>())
                .add((int) t.partition());
    }

    private static void remember(Map<Task, String> into, Map<String, Set<Integer>> held, String member,
            GroupView view) {
        if (held == null) {
            return;
        }
        for (Map.Entry<String, Set<Integer>> sub : held.entrySet()) {
            Long number = sub.getKey() == null || sub.getValue() == null ? null
                    : view.subtopologyNumbers.get(sub.getKey());
            if (number == null) {
                continue;
            }
            for (Integer p : sub.getValue()) {
                if (p != null) {
                    into.putIfAbsent(new Task(number, p), member);
                }
            }
        }
    }
}
