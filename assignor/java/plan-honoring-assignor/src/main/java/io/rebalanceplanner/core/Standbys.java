package io.rebalanceplanner.core;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * Standby placement: least-loaded clients, spread over distinct rack tag values when tags are configured (a port
 * of Python's {@code standby.place_standbys} as the KIP-441 baseline calls it: no {@code preference}, no
 * {@code keep}; those serve the planner, which the plugin does not run).
 */
final class Standbys {
    /** One hop of a standby shift: {@code giver} hands its standby of {@code task} to {@code taker}. */
    private static final class Hop {
        final String giver;
        final String taker;
        final Task task;

        Hop(String giver, String taker, Task task) {
            this.giver = giver;
            this.taker = taker;
            this.task = task;
        }
    }

    private Standbys() {}

    /** Give every task {@code replicas} standbys on clients that do not hold it, then even out the loads. */
    static void place(Placement placement, List<Task> tasks, int replicas, List<String> tagKeys) {
        int wanted = Math.min(replicas, placement.processIds.size() - 1);
        if (wanted <= 0) {
            return;
        }
        TagSpread spread = tagKeys.isEmpty() ? null : new TagSpread(placement, tagKeys);
        Map<Task, Integer> have = new HashMap<>();
        for (String p : placement.processIds) {
            for (Task t : placement.standby.get(p)) {
                have.merge(t, 1, Integer::sum);
            }
        }
        for (Task task : tasks) {
            int missing = wanted - have.getOrDefault(task, 0);
            for (int i = 0; i < missing; i++) {
                // Python keeps a heap of (load, pid) without tags; it always yields this same minimum, since a
                // client's entry is refreshed whenever it takes a standby and skipped entries keep their keys.
                String pid = bestFree(placement, task, spread);
                placement.standby.get(pid).add(task);
                if (spread != null) {
                    spread.add(pid, task);
                }
            }
        }
        balance(placement, spread);
    }

    /** The client that does not hold the task with the fewest tag conflicts, then the least load, then id. */
    private static String bestFree(Placement placement, Task task, TagSpread spread) {
        String best = null;
        int bestConflicts = 0;
        double bestLoad = 0;
        for (String p : placement.processIds) {
            if (placement.holds(p, task)) {
                continue;
            }
            int conflicts = spread == null ? 0 : spread.conflicts(p, task, null);
            double load = placement.assignedLoad(p);
            // processIds is sorted, so the first of equal (conflicts, load) wins the id tie-break.
            if (best == null || conflicts < bestConflicts
                    || (conflicts == bestConflicts && Double.compare(load, bestLoad) < 0)) {
                best = p;
                bestConflicts = conflicts;
                bestLoad = load;
            }
        }
        if (best == null) {
            throw new IllegalStateException("no client is free to hold a standby of " + task);
        }
        return best;
    }

    /**
     * Shift standbys from the most to the least loaded clients while two differ by more than one per capacity.
     * A shift may be a chain (A gives a standby to B, B another to C) when no direct move fits. Each shift lowers
     * sum(load^2 / capacity), so the loop ends. With rack tags, direct moves that keep the spread come first,
     * but balance (B1) wins over the spread.
     */
    private static void balance(Placement placement, TagSpread spread) {
        while (shiftOne(placement, spread)) {
            // each round moves at least one standby
        }
    }

    private static List<String> byLoad(Placement placement) {
        List<String> sorted = new ArrayList<>(placement.processIds);
        sorted.sort((a, b) -> {
            int c = Double.compare(placement.assignedLoad(a), placement.assignedLoad(b));
            return c != 0 ? c : CodePoints.compare(a, b);
        });
        return sorted;
    }

    private static boolean shiftOne(Placement placement, TagSpread spread) {
        List<String> byLoad = byLoad(placement);
        for (int i = byLoad.size() - 1; i >= 0; i--) {
            String src = byLoad.get(i);
            double srcLoad = placement.assignedLoad(src);
            List<String> targets = new ArrayList<>();
            for (String d : byLoad) {
                if (srcLoad - placement.assignedLoad(d) > 1) {
                    targets.add(d);
                }
            }
            if (targets.isEmpty()) {
                continue;
            }
            List<Hop> path = shiftPath(placement, src, targets, spread);
            if (!path.isEmpty()) {
                for (Hop hop : path) {
                    placement.standby.get(hop.giver).remove(hop.task);
                    placement.standby.get(hop.taker).add(hop.task);
                    if (spread != null) {
                        spread.remove(hop.giver, hop.task);
                        spread.add(hop.taker, hop.task);
                    }
                }
                return true;
            }
        }
        return false;
    }

    /**
     * A standby of {@code src} that {@code dst} could take over (the first in task order), or null. With
     * {@code keepSpread} the move may not put the task on more repeated rack tag values than before.
     */
    private static Task movable(Placement placement, String src, String dst, TagSpread spread, boolean keepSpread) {
        for (Task task : placement.standby.get(src)) {
            if (placement.holds(dst, task)) {
                continue;
            }
            if (keepSpread && spread != null
                    && spread.conflicts(dst, task, src) > spread.conflicts(src, task, src)) {
                continue;
            }
            return task;
        }
        return null;
    }

    /** The shortest chain of standby moves from {@code src} to the least loaded reachable target (BFS). */
    private static List<Hop> shiftPath(Placement placement, String src, List<String> targets, TagSpread spread) {
        if (spread != null) {
            for (String taker : targets) { // least loaded first
                Task task = movable(placement, src, taker, spread, true);
                if (task != null) {
                    return List.of(new Hop(src, taker, task));
                }
            }
        }
        Set<String> wanted = new HashSet<>(targets);
        Map<String, Hop> cameFrom = new HashMap<>();
        List<String> frontier = List.of(src);
        while (!frontier.isEmpty()) {
            List<String> reached = new ArrayList<>();
            for (String giver : frontier) {
                for (String taker : placement.processIds) {
                    if (taker.equals(src) || cameFrom.containsKey(taker)) {
                        continue;
                    }
                    Task task = movable(placement, giver, taker, spread, false);
                    if (task != null) {
                        cameFrom.put(taker, new Hop(giver, taker, task));
                        reached.add(taker);
                    }
                }
            }
            String node = null;
            for (String t : reached) {
                if (!wanted.contains(t)) {
                    continue;
                }
                if (node == null) {
                    node = t;
                    continue;
                }
                int c = Double.compare(placement.assignedLoad(t), placement.assignedLoad(node));
                if (c < 0 || (c == 0 && CodePoints.compare(t, node) < 0)) {
                    node = t;
                }
            }
            if (node != null) {
                List<Hop> path = new ArrayList<>();
                while (!node.equals(src)) {
                    Hop hop = cameFrom.get(node);
                    path.add(0, hop);
                    node = hop.giver;
                }
                return path;
            }
            frontier = reached;
        }
        return List.of();
    }
}
