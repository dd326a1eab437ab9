package io.rebalanceplanner.broker;

import io.rebalanceplanner.core.Task;
import java.util.HashMap;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.TreeSet;
import org.apache.kafka.coordinator.group.api.streams.assignor.GroupAssignment;
import org.apache.kafka.coordinator.group.api.streams.assignor.MemberAssignment;
import org.apache.kafka.coordinator.group.streams.assignor.AssignmentConfigsImpl;
import org.apache.kafka.coordinator.group.streams.assignor.GroupSpecImpl;
import org.apache.kafka.coordinator.group.streams.assignor.MemberMetadataAndStateImpl;

/** Builds Kafka's own GroupSpec implementation, member by member. */
final class Specs {
    /** One member as the broker would describe it. */
    static final class Member {
        final String memberId;
        final String processId;
        final Map<String, String> tags = new HashMap<>();
        final Map<String, Set<Integer>> active = new HashMap<>();
        final Map<String, Set<Integer>> standby = new HashMap<>();
        final Map<String, Map<Integer, Long>> offsets = new HashMap<>();
        final Map<String, Map<Integer, Long>> ends = new HashMap<>();

        Member(String memberId, String processId) {
            this.memberId = memberId;
            this.processId = processId;
        }

        Member active(String task) {
            Task t = Task.parseOrNull(task);
            active.computeIfAbsent(String.valueOf(t.subtopology()), k -> new TreeSet<>()).add((int) t.partition());
            return this;
        }

        Member standby(String task) {
            Task t = Task.parseOrNull(task);
            standby.computeIfAbsent(String.valueOf(t.subtopology()), k -> new TreeSet<>()).add((int) t.partition());
            return this;
        }

        Member offset(String task, long offsetSum) {
            Task t = Task.parseOrNull(task);
            offsets.computeIfAbsent(String.valueOf(t.subtopology()), k -> new HashMap<>()).put((int) t.partition(),
                    offsetSum);
            return this;
        }

        Member end(String task, long endSum) {
            Task t = Task.parseOrNull(task);
            ends.computeIfAbsent(String.valueOf(t.subtopology()), k -> new HashMap<>()).put((int) t.partition(),
                    endSum);
            return this;
        }

        Member tag(String key, String value) {
            tags.put(key, value);
            return this;
        }

        MemberMetadataAndStateImpl build() {
            return new MemberMetadataAndStateImpl(Optional.empty(), Optional.empty(), processId, tags, active, standby,
                    Map.of(), offsets, ends);
        }
    }

    private final Map<String, Member> members = new HashMap<>();
    private int standbys;

    Member member(String memberId, String processId) {
        return members.computeIfAbsent(memberId, k -> new Member(memberId, processId));
    }

    Specs standbys(int n) {
        standbys = n;
        return this;
    }

    GroupSpecImpl build() {
        Map<String, MemberMetadataAndStateImpl> built = new HashMap<>();
        members.forEach((id, m) -> built.put(id, m.build()));
        return new GroupSpecImpl(built, new AssignmentConfigsImpl(standbys, java.util.List.of()));
    }

    /** Process id to "active" / "standby" task ids, as strings, from an assignment and the spec's members. */
    static Map<String, Map<String, Set<String>>> byProcess(GroupSpecImpl spec, GroupAssignment assignment) {
        Map<String, Map<String, Set<String>>> out = new java.util.TreeMap<>();
        assignment.members().forEach((memberId, a) -> {
            String pid = spec.memberMetadata(memberId).processId();
            Map<String, Set<String>> roles = out.computeIfAbsent(pid, k -> new HashMap<>());
            roles.computeIfAbsent("active", k -> new TreeSet<>()).addAll(names(a, true));
            roles.computeIfAbsent("standby", k -> new TreeSet<>()).addAll(names(a, false));
        });
        return out;
    }

    private static Set<String> names(MemberAssignment a, boolean active) {
        Set<String> out = new TreeSet<>();
        (active ? a.activeTasks() : a.standbyTasks()).forEach((sub, ps) -> ps.forEach(p -> out.add(sub + "_" + p)));
        return out;
    }
}
