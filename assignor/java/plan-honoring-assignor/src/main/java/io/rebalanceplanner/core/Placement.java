package io.rebalanceplanner.core;

import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;

/**
 * A working copy of an assignment, private to one assignor call (a port of Python's Placement): per-client task
 * sets by role plus the load bookkeeping both {@link Honor} and {@link HighAvailability} share. It never escapes
 * the call that built it; {@link #freeze} is the immutable result.
 */
final class Placement {
    /** Every client, sorted by code point: the tie-break order of every rule. */
    final List<String> processIds;
    final Map<String, Integer> capacity = new HashMap<>();
    final Map<String, Map<String, String>> tags = new HashMap<>();
    final Map<String, TreeSet<Task>> active = new HashMap<>();
    final Map<String, TreeSet<Task>> standby = new HashMap<>();
    final Map<String, TreeSet<Task>> warmup = new HashMap<>();
    /** Task to the client it is active on so far. */
    final Map<Task, String> owner = new HashMap<>();
    private final Map<Task, Set<String>> previousOwners = new HashMap<>();

    Placement(LiveGroup group) {
        List<String> pids = new ArrayList<>();
        for (LiveGroup.Client c : group.clients()) {
            pids.add(c.processId());
            capacity.put(c.processId(), c.capacity());
            tags.put(c.processId(), c.clientTags());
            active.put(c.processId(), new TreeSet<>());
            standby.put(c.processId(), new TreeSet<>());
            warmup.put(c.processId(), new TreeSet<>());
            for (Task t : c.previousActive()) {
                previousOwners.computeIfAbsent(t, k -> new HashSet<>()).add(c.processId());
            }
        }
        pids.sort(CodePoints.ORDER);
        processIds = List.copyOf(pids);
    }

    /** The clients that ran the task as an active before this rebalance (normally one). */
    Set<String> previousOwnerOf(Task task) {
        return previousOwners.getOrDefault(task, Set.of());
    }

    void assignActive(String pid, Task task) {
        active.get(pid).add(task);
        owner.put(task, pid);
    }

    void unassignActive(String pid, Task task) {
        active.get(pid).remove(task);
        owner.remove(task, pid);
    }

    void standbyOf(Task task, Collection<String> pids) {
        for (String pid : pids) {
            standby.get(pid).add(task);
        }
    }

    /** Whether the client has the task in any role. */
    boolean holds(String pid, Task task) {
        return active.get(pid).contains(task) || standby.get(pid).contains(task) || warmup.get(pid).contains(task);
    }

    /**
     * Every replica the client holds per unit of capacity (Kafka's assignedTaskLoad). Doubles compare exactly
     * like Python's floats: IEEE division is correctly rounded, so equal ratios (2/4, 1/2) tie in both.
     */
    double assignedLoad(String pid) {
        int held = active.get(pid).size() + standby.get(pid).size() + warmup.get(pid).size();
        return (double) held / capacity.get(pid);
    }

    /** Active tasks per unit of capacity. */
    double activeLoad(String pid) {
        return (double) active.get(pid).size() / capacity.get(pid);
    }

    /** The candidate with the smallest assigned load, ties by process id; null when there is none. */
    String leastLoaded(List<String> candidates) {
        if (candidates.size() <= 1) {
            return candidates.isEmpty() ? null : candidates.get(0);
        }
        String best = null;
        for (String p : candidates) {
            if (best == null) {
                best = p;
                continue;
            }
            int c = Double.compare(assignedLoad(p), assignedLoad(best));
            if (c < 0 || (c == 0 && CodePoints.compare(p, best) < 0)) {
                best = p;
            }
        }
        return best;
    }

    Map<String, ClientTasks> freeze() {
        Map<String, ClientTasks> out = new TreeMap<>(CodePoints.ORDER);
        for (String p : processIds) {
            out.put(p, new ClientTasks(active.get(p), standby.get(p), warmup.get(p)));
        }
        return out;
    }
}
