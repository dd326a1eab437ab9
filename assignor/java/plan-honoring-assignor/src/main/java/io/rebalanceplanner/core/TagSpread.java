package io.rebalanceplanner.core;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeSet;

/**
 * Per task and rack tag key, how many of its replicas (active and standbys) sit on each tag value (KIP-708;
 * Python's {@code standby.TagSpread}). Only standby placement reads it; warmups are not counted.
 */
final class TagSpread {
    private final Placement placement;
    private final List<String> tagKeys;
    /** Task to, per tag key (in configured order), tag value to replica count. */
    private final Map<Task, List<Map<String, Integer>>> counts = new HashMap<>();

    TagSpread(Placement placement, List<String> tagKeys) {
        this.placement = placement;
        this.tagKeys = List.copyOf(tagKeys);
        for (String pid : placement.processIds) {
            TreeSet<Task> held = new TreeSet<>(placement.active.get(pid));
            held.addAll(placement.standby.get(pid));
            for (Task task : held) {
                add(pid, task);
            }
        }
    }

    void add(String pid, Task task) {
        List<Map<String, Integer>> perKey = counts.computeIfAbsent(task, t -> {
            List<Map<String, Integer>> fresh = new ArrayList<>();
            for (int i = 0; i < tagKeys.size(); i++) {
                fresh.add(new HashMap<>());
            }
            return fresh;
        });
        bump(perKey, pid, 1);
    }

    void remove(String pid, Task task) {
        bump(counts.get(task), pid, -1);
    }

    private void bump(List<Map<String, Integer>> perKey, String pid, int delta) {
        Map<String, String> tags = placement.tags.get(pid);
        for (int i = 0; i < tagKeys.size(); i++) {
            String value = tags.get(tagKeys.get(i));
            if (value != null) {
                perKey.get(i).merge(value, delta, Integer::sum);
            }
        }
    }

    /**
     * Tag keys on which the client repeats a value another replica of the task uses. With {@code ignoring} (a
     * client about to give the task up), that client's own replica does not count.
     */
    int conflicts(String pid, Task task, String ignoring) {
        List<Map<String, Integer>> perKey = counts.get(task);
        if (perKey == null) {
            return 0;
        }
        Map<String, String> tags = placement.tags.get(pid);
        Map<String, String> ignoredTags = ignoring == null ? null : placement.tags.get(ignoring);
        int found = 0;
        for (int i = 0; i < tagKeys.size(); i++) {
            String key = tagKeys.get(i);
            String value = tags.get(key);
            if (value == null) {
                continue;
            }
            int used = perKey.get(i).getOrDefault(value, 0);
            if (pid.equals(ignoring) || (ignoredTags != null && value.equals(ignoredTags.get(key)))) {
                used--;
            }
            if (used > 0) {
                found++;
            }
        }
        return found;
    }
}
