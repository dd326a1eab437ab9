package io.rebalanceplanner.core;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;

/**
 * Whether a verified target fits the live group, checked in the order of schemas/vectors/README.md
 * (Python: {@code unfit_reason} then {@code validity_violations}).
 */
public final class FitCheck {
    /** Why the target does not fit: a reason code and a human detail. */
    public static final class Unfit {
        private final String code;
        private final String detail;

        Unfit(String code, String detail) {
            this.code = code;
            this.detail = detail;
        }

        public String code() {
            return code;
        }

        public String detail() {
            return detail;
        }

        @Override
        public String toString() {
            return code + ": " + detail;
        }
    }

    private FitCheck() {}

    /**
     * The target without the instances it gives nothing that are no longer members (Python's {@code target_for}):
     * a drained instance that was stopped. Its leaving changes nothing the target asks of the others, so the plan
     * still fits them; without this the group would fall back to KIP-441, which may reshuffle (and restore) what
     * the drain had just settled.
     */
    public static Map<String, ClientTasks> targetFor(Map<String, ClientTasks> target, LiveGroup group) {
        Set<String> live = members(group);
        Map<String, ClientTasks> out = new TreeMap<>(CodePoints.ORDER);
        target.forEach((pid, tasks) -> {
            if (live.contains(pid) || !tasks.active().isEmpty() || !tasks.standby().isEmpty()) {
                out.put(pid, tasks);
            }
        });
        return out;
    }

    private static Set<String> members(LiveGroup group) {
        Set<String> live = new TreeSet<>(CodePoints.ORDER);
        for (LiveGroup.Client c : group.clients()) {
            live.add(c.processId());
        }
        return live;
    }

    /** Null when the target fits; an instance the target gives nothing may have left (see {@link #targetFor}). */
    public static Unfit unfitReason(Map<String, ClientTasks> plannedTarget, LiveGroup group, PlanConfigs configs) {
        Set<String> live = members(group);
        Map<String, ClientTasks> target = targetFor(plannedTarget, group);
        Set<String> departed = new TreeSet<>(CodePoints.ORDER);
        departed.addAll(target.keySet());
        departed.removeAll(live);
        if (!departed.isEmpty()) {
            return new Unfit("departed_instances", "the target names instances that are not members: "
                    + show(departed));
        }
        Set<String> unknown = new TreeSet<>(CodePoints.ORDER);
        unknown.addAll(live);
        unknown.removeAll(target.keySet());
        if (!unknown.isEmpty()) {
            return new Unfit("unknown_instances", "members the target does not know: " + show(unknown));
        }
        Set<Task> planned = new TreeSet<>();
        for (ClientTasks ct : target.values()) {
            planned.addAll(ct.active());
        }
        Set<Task> all = group.allTasks();
        if (!planned.equals(all)) {
            Set<Task> missing = new TreeSet<>(all);
            missing.removeAll(planned);
            Set<Task> extra = new TreeSet<>(planned);
            extra.removeAll(all);
            return new Unfit("tasks_changed", "the target does not match the group's tasks (unplanned: "
                    + show(missing) + "; unknown: " + show(extra) + ")");
        }
        List<String> violations = violations(target, group, configs);
        if (!violations.isEmpty()) {
            return new Unfit("invalid_target", String.join("; ", violations.subList(0, Math.min(5,
                    violations.size()))));
        }
        return null;
    }

    /** V1-V4 for a target (no warmups): each task active once, disjoint roles, standbys as configured. */
    static List<String> violations(Map<String, ClientTasks> target, LiveGroup group, PlanConfigs configs) {
        List<String> found = new ArrayList<>();
        Set<Task> all = group.allTasks();
        Map<Task, Integer> activeCount = new HashMap<>();
        Map<Task, Integer> standbyCount = new HashMap<>();
        for (Map.Entry<String, ClientTasks> e : target.entrySet()) {
            String pid = e.getKey();
            ClientTasks ct = e.getValue();
            for (Task t : ct.active()) {
                activeCount.merge(t, 1, Integer::sum);
            }
            for (Task t : ct.standby()) {
                standbyCount.merge(t, 1, Integer::sum);
                if (!all.contains(t)) {
                    found.add("V1: client '" + pid + "' holds unknown task " + t);
                } else if (group.statelessTasks().contains(t)) {
                    found.add("V3: client '" + pid + "' holds stateless task " + t + " as a standby");
                }
                if (ct.active().contains(t)) {
                    found.add("V2: client '" + pid + "' holds " + t + " as active and standby");
                }
            }
        }
        for (Task t : all) {
            int n = activeCount.getOrDefault(t, 0);
            if (n != 1) {
                found.add("V1: task " + t + " is active on " + n + " clients, expected exactly 1");
            }
        }
        int expected = Math.min(group.clients().size() - 1, configs.numStandbyReplicas());
        for (Task t : group.statefulTasks()) {
            int n = standbyCount.getOrDefault(t, 0);
            if (n != expected) {
                found.add("V4: task " + t + " has " + n + " standbys, expected " + expected);
            }
        }
        return found;
    }

    private static String show(Set<?> items) {
        if (items.isEmpty()) {
            return "none";
        }
        List<String> shown = new ArrayList<>();
        for (Object o : items) {
            if (shown.size() == 5) {
                shown.add("...");
                break;
            }
            shown.add(String.valueOf(o));
        }
        return String.join(", ", shown);
    }
}
