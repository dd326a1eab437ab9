package io.rebalanceplanner.broker;

import io.rebalanceplanner.core.CodePoints;
import io.rebalanceplanner.core.LagIndex;
import io.rebalanceplanner.core.LiveGroup;
import io.rebalanceplanner.core.Task;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import org.apache.kafka.coordinator.group.api.streams.assignor.GroupSpec;
import org.apache.kafka.coordinator.group.api.streams.assignor.MemberAssignmentMetadata;
import org.apache.kafka.coordinator.group.api.streams.assignor.MemberAssignmentState;
import org.apache.kafka.coordinator.group.api.streams.assignor.TopologyDescriber;

/**
 * One streams group as the shared core sees it, built once per {@code assign} call: a client per process id (its
 * members are its threads, so capacity = member count), its current tasks, and dense lags from the heartbeats'
 * {@code taskOffsets}/{@code taskEndOffsets}.
 *
 * <p>Lags, with Kafka Streams' sentinels: a task a process runs as active is caught up ({@value
 * LagIndex#LATEST_OFFSET}); a task's changelog end is the largest known end any member reported (the broker sends
 * {@code Long.MAX_VALUE} when it does not know, and only for assigned standbys); with both offset and end known the
 * lag is {@code end - offset} (state at or ahead of the end is caught up: lag 0, see {@link #lag}); state whose
 * end is unknown is {@value LagIndex#UNKNOWN_OFFSET_SUM} (never caught up); no state and no known end is
 * {@code Long.MAX_VALUE} (never caught up, ranked last). Unknown is never taken for caught up.
 */
final class GroupView {
    static final int MAX_MEMBERS = 100_000;
    static final int MAX_SUBTOPOLOGIES = 10_000;
    static final int MAX_PARTITIONS = 100_000;
    static final int MAX_TASKS = 1_000_000;
    static final int MAX_ID_CHARS = 249;
    static final long NO_STATE_UNKNOWN_END = Long.MAX_VALUE;

    final LiveGroup group;
    /** Process id (code-point order) to its member ids (sorted). */
    final Map<String, List<String>> membersByProcess;
    /** Process id to task to lag, for the tasks it runs or has state of. */
    final Map<String, Map<Task, Long>> lags;
    /** Per stateful task, the lag of a process without state of it: the changelog end, or unknown. */
    final Map<Task, Long> noStateLags;
    final List<String> processIds;
    /** The values members gave the group tag, if any did. */
    final Set<String> tagValues;
    /** Our task's subtopology number to the broker's subtopology id. */
    final Map<Long, String> subtopologyIds;
    /** The broker's subtopology id to our number (only the topology's subtopologies). */
    final Map<String, Long> subtopologyNumbers;

    private GroupView(LiveGroup group, Map<String, List<String>> membersByProcess, Map<String, Map<Task, Long>> lags,
            Map<Task, Long> noStateLags, Set<String> tagValues, Map<Long, String> subtopologyIds,
            Map<String, Long> subtopologyNumbers) {
        this.group = group;
        this.membersByProcess = membersByProcess;
        this.lags = lags;
        this.noStateLags = noStateLags;
        this.processIds = List.copyOf(membersByProcess.keySet());
        this.tagValues = tagValues;
        this.subtopologyIds = subtopologyIds;
        this.subtopologyNumbers = subtopologyNumbers;
    }

    static GroupView of(GroupSpec spec, TopologyDescriber topology, String groupTag) throws UnfitGroupException {
        Map<Long, String> subtopologyIds = new HashMap<>();
        Map<String, Long> numbers = new HashMap<>();
        Set<Task> stateful = new HashSet<>();
        Set<Task> stateless = new HashSet<>();
        List<String> subtopologies = topology.subtopologies();
        if (subtopologies.size() > MAX_SUBTOPOLOGIES) {
            throw new UnfitGroupException("out_of_bounds", subtopologies.size() + " subtopologies, more than "
                    + MAX_SUBTOPOLOGIES);
        }
        for (String sub : subtopologies) {
            // Plans name tasks "<int>_<int>": a subtopology id that is not a canonical int cannot be planned.
            Task probe = sub == null ? null : Task.parseOrNull(sub + "_0");
            if (probe == null) {
                throw new UnfitGroupException("unsupported_topology", "subtopology id '" + sub
                        + "' is not a non-negative integer");
            }
            int partitions = topology.maxNumInputPartitions(sub);
            if (partitions < 0 || partitions > MAX_PARTITIONS
                    || stateful.size() + stateless.size() + partitions > MAX_TASKS) {
                throw new UnfitGroupException("out_of_bounds", "subtopology " + sub + " has " + partitions
                        + " partitions (at most " + MAX_PARTITIONS + " each, " + MAX_TASKS + " tasks in all)");
            }
            subtopologyIds.put(probe.subtopology(), sub);
            numbers.put(sub, probe.subtopology());
            boolean isStateful = topology.isStateful(sub);
            for (int p = 0; p < partitions; p++) {
                (isStateful ? stateful : stateless).add(new Task(probe.subtopology(), p));
            }
        }
        Collection<String> memberIds = spec.memberIds();
        if (memberIds.isEmpty() || memberIds.size() > MAX_MEMBERS) {
            throw new UnfitGroupException("out_of_bounds", memberIds.size() + " members (expected 1.."
                    + MAX_MEMBERS + ")");
        }
        Map<String, List<String>> byProcess = new TreeMap<>(CodePoints.ORDER);
        Set<String> tagValues = new TreeSet<>(CodePoints.ORDER);
        for (String member : memberIds) {
            MemberAssignmentMetadata meta = spec.memberMetadata(member);
            String pid = meta.processId();
            if (pid == null || pid.isEmpty() || pid.length() > MAX_ID_CHARS) {
                throw new UnfitGroupException("out_of_bounds", "member " + member + " has no usable process id");
            }
            byProcess.computeIfAbsent(pid, k -> new ArrayList<>()).add(member);
            String tag = groupTag.isEmpty() || meta.clientTags() == null ? null : meta.clientTags().get(groupTag);
            if (tag != null) {
                tagValues.add(tag);
            }
        }
        Map<Task, Long> ends = endOffsets(spec, memberIds, numbers, stateful);
        List<LiveGroup.Client> clients = new ArrayList<>();
        Map<String, Map<Task, Long>> lags = new HashMap<>();
        for (Map.Entry<String, List<String>> e : byProcess.entrySet()) {
            e.getValue().sort(null);
            Set<Task> active = new HashSet<>();
            Set<Task> standby = new HashSet<>();
            Map<Task, Long> offsets = new HashMap<>();
            for (String member : e.getValue()) {
                MemberAssignmentState state = spec.memberAssignmentState(member);
                addTasks(active, state.activeTasks(), numbers, stateful, stateless);
                addTasks(standby, state.standbyTasks(), numbers, stateful, stateless);
                addTasks(standby, state.warmupTasks(), numbers, stateful, stateless);
                addOffsets(offsets, state.taskOffsets(), numbers, stateful);
            }
            standby.removeAll(active);
            Map<String, String> tags = spec.memberMetadata(e.getValue().get(0)).clientTags();
            clients.add(new LiveGroup.Client(e.getKey(), e.getValue().size(), active, standby,
                    tags == null ? Map.of() : tags));
            // Sparse: only tasks the process runs or has state of; the rest lag the whole changelog (noStateLags).
            Map<Task, Long> clientLags = new HashMap<>();
            for (Task t : active) {
                if (stateful.contains(t)) {
                    clientLags.put(t, LagIndex.LATEST_OFFSET);
                }
            }
            for (Map.Entry<Task, Long> o : offsets.entrySet()) {
                clientLags.putIfAbsent(o.getKey(), lag(false, o.getValue(), ends.get(o.getKey())));
            }
            lags.put(e.getKey(), clientLags);
        }
        Map<Task, Long> noStateLags = new HashMap<>();
        for (Task t : stateful) {
            noStateLags.put(t, lag(false, null, ends.get(t)));
        }
        return new GroupView(new LiveGroup(clients, stateful, stateless), byProcess, lags, noStateLags, tagValues,
                subtopologyIds, numbers);
    }

    static long lag(boolean runsActive, Long offset, Long end) {
        if (runsActive) {
            return LagIndex.LATEST_OFFSET;
        }
        if (offset == null) {
            return end == null ? NO_STATE_UNKNOWN_END : end;
        }
        if (offset == LagIndex.UNKNOWN_OFFSET_SUM || end == null) {
            return LagIndex.UNKNOWN_OFFSET_SUM;
        }
        // Ahead of the end is caught up, as Kafka Streams 4.4 itself judges a warm-up on this protocol ("hot" when
        // end - offset <= acceptable lag): its offset sums are next offsets to fetch (last + 1, the checkpoint's) but
        // its end sums are last offsets (log end - 1), so a caught-up copy reads one ahead per changelog partition,
        // more when the end snapshot is older than the offsets. Classic's "ahead = corrupt, lag = end" never fits.
        return offset >= end ? 0 : end - offset;
    }

    /** One copy's lag from a heartbeat's raw offset sum and end offset sum (schemas/vectors/heartbeat_lags.json). */
    static long heartbeatLag(long offsetSum, long endOffsetSum) {
        return lag(false, known(offsetSum) ? offsetSum : LagIndex.UNKNOWN_OFFSET_SUM,
                known(endOffsetSum) ? endOffsetSum : null);
    }

    /** A reported sum the broker did not mark unknown ({@code Long.MAX_VALUE}) or negative. */
    static boolean known(long sum) {
        return sum >= 0 && sum < Long.MAX_VALUE;
    }

    /** The newest known end offset sum per stateful task: sums only grow, so the largest report is the freshest. */
    private static Map<Task, Long> endOffsets(GroupSpec spec, Collection<String> memberIds, Map<String, Long> numbers,
            Set<Task> stateful) {
        Map<Task, Long> ends = new HashMap<>();
        for (String member : memberIds) {
            Map<String, Map<Integer, Long>> reported = spec.memberAssignmentState(member).taskEndOffsets();
            forEachOffset(reported, numbers, stateful, (task, v) -> {
                if (known(v)) {
                    ends.merge(task, v, Math::max);
                }
            });
        }
        return ends;
    }

    /** A process's offset sum per task: the largest known over its members, else unknown if any reported one. */
    private static void addOffsets(Map<Task, Long> into, Map<String, Map<Integer, Long>> reported,
            Map<String, Long> numbers, Set<Task> stateful) {
        forEachOffset(reported, numbers, stateful, (task, v) -> {
            long mine = known(v) ? v : LagIndex.UNKNOWN_OFFSET_SUM;
            into.merge(task, mine, Math::max);
        });
    }

    private interface OffsetVisitor {
        void visit(Task task, long value);
    }

    private static void forEachOffset(Map<String, Map<Integer, Long>> reported, Map<String, Long> numbers,
            Set<Task> stateful, OffsetVisitor visitor) {
        if (reported == null) {
            return;
        }
        for (Map.Entry<String, Map<Integer, Long>> sub : reported.entrySet()) {
            Long number = sub.getKey() == null || sub.getValue() == null ? null : numbers.get(sub.getKey());
            if (number == null) {
                continue; // Offsets of a subtopology the topology does not have name no task of this group.
            }
            for (Map.Entry<Integer, Long> p : sub.getValue().entrySet()) {
                if (p.getKey() == null || p.getValue() == null) {
                    continue;
                }
                Task task = new Task(number, p.getKey());
                if (stateful.contains(task)) {
                    visitor.visit(task, p.getValue());
                }
            }
        }
    }

    /** Tasks a member holds; one the topology does not have cannot be "previous" and is dropped. */
    private static void addTasks(Set<Task> into, Map<String, Set<Integer>> held, Map<String, Long> numbers,
            Set<Task> stateful, Set<Task> stateless) {
        if (held == null) {
            return;
        }
        for (Map.Entry<String, Set<Integer>> sub : held.entrySet()) {
            Long number = sub.getKey() == null || sub.getValue() == null ? null : numbers.get(sub.getKey());
            if (number == null) {
                continue;
            }
            for (Integer p : sub.getValue()) {
                if (p == null) {
                    continue;
                }
                Task task = new Task(number, p);
                if (stateful.contains(task) || stateless.contains(task)) {
                    into.add(task);
                }
            }
        }
    }
}
