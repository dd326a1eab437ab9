package io.rebalanceplanner.core;

import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.SortedSet;
import java.util.TreeMap;
import java.util.TreeSet;

/**
 * Deferred resolution (design II; Kafka Connect's {@code scheduled.rebalance.max.delay.ms}), the rules of
 * Python's {@code assignor.protocol.deferral}: while a departed member is within the delay, everyone else keeps
 * their tasks, its active tasks fail over to a caught-up copy, a task with no such copy goes to the most
 * caught-up member (or is held, run by nobody, with {@code holdWithoutCaughtUpCopy}), and the group rebalances
 * again at the earliest deadline.
 */
public final class Deferral {
    private Deferral() {}

    /** How long a departed member's place is kept (0: not at all, as Kafka Streams) and what its uncopied tasks do. */
    public record Settings(long scheduledRebalanceMaxDelayMs, boolean holdWithoutCaughtUpCopy) {
        public Settings {
            if (scheduledRebalanceMaxDelayMs < 0) {
                throw new IllegalArgumentException("scheduled rebalance max delay must be >= 0, got "
                        + scheduledRebalanceMaxDelayMs);
            }
        }
    }

    /** A member that left: when, and the active tasks it was running. */
    public record Departure(String processId, long departedAtMs, SortedSet<Task> active) {
        public Departure {
            active = Collections.unmodifiableSortedSet(new TreeSet<>(active));
        }
    }

    /**
     * What the group runs while members are away.
     *
     * @param assignment every live member's tasks; its follow-up flag is always set
     * @param rebalanceInMs until the earliest pending deadline, at least 1
     * @param held tasks nobody runs until their member returns or the deadline passes
     */
    public record Result(LiveAssignment assignment, long rebalanceInMs, SortedSet<Task> held) {}

    /**
     * Members still away within the delay: the known departures plus members of {@code previous} missing now
     * (departed now), minus those back or past their deadline.
     */
    public static Map<String, Departure> pending(Map<String, ClientTasks> previous, LiveGroup group,
            Map<String, Departure> departures, long nowMs, Settings settings) {
        Map<String, Departure> out = new TreeMap<>(CodePoints.ORDER);
        if (settings.scheduledRebalanceMaxDelayMs() == 0) {
            return out;
        }
        Set<String> live = new HashSet<>();
        for (LiveGroup.Client c : group.clients()) {
            live.add(c.processId());
        }
        Map<String, Departure> all = new HashMap<>(departures);
        if (previous != null) {
            previous.forEach((pid, tasks) -> {
                if (!live.contains(pid)) {
                    all.putIfAbsent(pid, new Departure(pid, nowMs, tasks.active()));
                }
            });
        }
        all.forEach((pid, d) -> {
            if (!live.contains(pid) && nowMs < d.departedAtMs() + settings.scheduledRebalanceMaxDelayMs()) {
                out.put(pid, d);
            }
        });
        return out;
    }

    /**
     * Keep every live member's previous tasks and place only the tasks nobody runs now.
     *
     * @param departures the pending ones, non-empty
     * @param ends changelog end offset sums, only to rank a client whose position is unknown (-3): it owes the
     *     whole changelog, as Python's {@code restore_owed} says; without them it ranks behind every known lag
     */
    public static Result defer(Map<String, ClientTasks> previous, LiveGroup group, LagIndex lags,
            Map<Task, Long> ends, Map<String, Departure> departures, long nowMs, Settings settings) {
        SortedSet<Task> tasks = group.allTasks();
        List<String> live = new ArrayList<>();
        Map<String, Integer> capacity = new HashMap<>();
        for (LiveGroup.Client c : group.clients()) {
            live.add(c.processId());
            capacity.put(c.processId(), c.capacity());
        }
        live.sort(CodePoints.ORDER);
        Map<String, Set<Task>> active = new HashMap<>();
        Map<String, Set<Task>> standby = new HashMap<>();
        Map<String, Set<Task>> warmup = new HashMap<>();
        Set<Task> running = new HashSet<>();
        for (String pid : live) {
            ClientTasks kept = previous.get(pid);
            active.put(pid, kept == null ? new HashSet<>() : only(kept.active(), tasks));
            standby.put(pid, kept == null ? new HashSet<>() : only(kept.standby(), group.statefulTasks()));
            warmup.put(pid, kept == null ? new HashSet<>() : only(kept.warmup(), group.statefulTasks()));
            running.addAll(active.get(pid));
        }
        Set<Task> away = new HashSet<>();
        long earliest = Long.MAX_VALUE;
        for (Departure d : departures.values()) {
            away.addAll(d.active());
            earliest = Math.min(earliest, d.departedAtMs());
        }
        SortedSet<Task> held = new TreeSet<>();
        for (Task task : tasks) {
            if (running.contains(task)) {
                continue;
            }
            String owner;
            if (group.statefulTasks().contains(task)) {
                List<String> caughtUp = new ArrayList<>();
                for (String pid : live) {
                    if (lags.caughtUp(pid, task)) {
                        caughtUp.add(pid);
                    }
                }
                if (caughtUp.isEmpty() && away.contains(task) && settings.holdWithoutCaughtUpCopy()) {
                    held.add(task);
                    continue;
                }
                owner = caughtUp.isEmpty() ? leastOwing(live, task, lags, ends, active, capacity)
                        : leastLoaded(caughtUp, active, capacity);
            } else {
                owner = leastLoaded(live, active, capacity);
            }
            active.get(owner).add(task);
            standby.get(owner).remove(task);
            warmup.get(owner).remove(task);
        }
        Map<String, ClientTasks> out = new TreeMap<>(CodePoints.ORDER);
        for (String pid : live) {
            out.put(pid, new ClientTasks(active.get(pid), standby.get(pid), warmup.get(pid)));
        }
        long deadline = earliest + settings.scheduledRebalanceMaxDelayMs();
        return new Result(new LiveAssignment(out, true), Math.max(1, deadline - nowMs),
                Collections.unmodifiableSortedSet(held));
    }

    private static Set<Task> only(Set<Task> these, Set<Task> known) {
        Set<Task> out = new HashSet<>(these);
        out.retainAll(known);
        return out;
    }

    /** Python's {@code restore_owed}: 0 when caught up, the whole changelog when the position is unknown. */
    private static long owed(String pid, Task task, LagIndex lags, Map<Task, Long> ends) {
        if (lags.caughtUp(pid, task)) {
            return 0;
        }
        long lag = lags.lag(pid, task);
        return lag < 0 ? ends.getOrDefault(task, Long.MAX_VALUE) : lag;
    }

    private static int compareLoad(String p, String q, Map<String, Set<Task>> active, Map<String, Integer> capacity) {
        // Division, not cross-multiplication, so that ties fall exactly as Python's float keys do.
        int c = Double.compare((double) active.get(p).size() / capacity.get(p),
                (double) active.get(q).size() / capacity.get(q));
        return c != 0 ? c : CodePoints.compare(p, q);
    }

    private static String leastLoaded(List<String> candidates, Map<String, Set<Task>> active,
            Map<String, Integer> capacity) {
        String best = null;
        for (String p : candidates) {
            if (best == null || compareLoad(p, best, active, capacity) < 0) {
                best = p;
            }
        }
        return best;
    }

    private static String leastOwing(List<String> candidates, Task task, LagIndex lags, Map<Task, Long> ends,
            Map<String, Set<Task>> active, Map<String, Integer> capacity) {
        String best = null;
        for (String p : candidates) {
            int c = best == null ? -1 : Long.compare(owed(p, task, lags, ends), owed(best, task, lags, ends));
            if (c < 0 || (c == 0 && compareLoad(p, best, active, capacity) < 0)) {
                best = p;
            }
        }
        return best;
    }
}
