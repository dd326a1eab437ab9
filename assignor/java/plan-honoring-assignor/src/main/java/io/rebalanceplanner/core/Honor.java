package io.rebalanceplanner.core;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;

/**
 * What a group leader does with an approved target at each rebalance: move only what is caught up.
 *
 * <p>A port of Python's {@code assignor.honor.honor_target}; the shared honor vectors hold both to the same
 * output, tie-breaks included, so change the two together.
 */
public final class Honor {
    private Honor() {}

    /**
     * @param target a target that fits the group (see {@link FitCheck})
     * @param order the plan's move order: warmups are placed in this order while the budget lasts
     */
    public static LiveAssignment honorTarget(Map<String, ClientTasks> target, LiveGroup group, PlanConfigs configs,
            List<Task> order, LagIndex lags) {
        Placement placement = new Placement(group);
        int budget = configs.maxWarmupReplicas();
        Map<Task, String> owners = new HashMap<>();
        Map<Task, Set<String>> standbyHolders = new HashMap<>();
        for (Map.Entry<String, ClientTasks> e : target.entrySet()) {
            for (Task t : e.getValue().active()) {
                owners.put(t, e.getKey());
            }
            for (Task t : e.getValue().standby()) {
                standbyHolders.computeIfAbsent(t, k -> new HashSet<>()).add(e.getKey());
            }
        }
        LinkedHashSet<Task> pending = new LinkedHashSet<>();
        for (Task t : order) {
            if (group.statefulTasks().contains(t)) {
                pending.add(t);
            }
        }
        pending.addAll(group.statefulTasks());
        List<Map.Entry<String, Task>> lenders = new ArrayList<>();
        for (Task task : pending) {
            String owner = owners.get(task);
            Set<String> standbys = standbyHolders.getOrDefault(task, Set.of());
            if (lags.caughtUp(owner, task) || lags.rank(owner, task).equals(lags.bestRank(task))) {
                placement.assignActive(owner, task);
                placement.standbyOf(task, standbys);
                continue;
            }
            String keeper = keeper(placement, lags, task, standbys);
            placement.assignActive(keeper, task);
            if (standbys.contains(keeper)) {
                // The keeper holds a target standby: the target owner restores in that standby slot, for free.
                Set<String> slots = new HashSet<>(standbys);
                slots.remove(keeper);
                slots.add(owner);
                placement.standbyOf(task, slots);
                continue;
            }
            String lender = null;
            for (String p : standbys) {
                if (lags.caughtUp(p, task)) {
                    continue;
                }
                if (lender == null) {
                    lender = p;
                    continue;
                }
                int c = lags.rank(p, task).compareTo(lags.rank(lender, task));
                if (c > 0 || (c == 0 && CodePoints.compare(p, lender) > 0)) {
                    lender = p;
                }
            }
            if (lender != null) {
                // A target standby that must restore anyway lends its slot to the target owner for this step:
                // the owner restores without warmup budget; the lender warms up too if budget is left at the end.
                Set<String> slots = new HashSet<>(standbys);
                slots.remove(lender);
                slots.add(owner);
                placement.standbyOf(task, slots);
                lenders.add(Map.entry(lender, task));
                continue;
            }
            placement.standbyOf(task, standbys);
            if (budget > 0) {
                budget--;
                placement.warmup.get(owner).add(task);
            }
        }
        int copies = 1 + configs.numStandbyReplicas();
        Map<String, Set<Task>> heldBefore = new HashMap<>();
        for (LiveGroup.Client c : group.clients()) {
            Set<Task> held = new HashSet<>(c.previousActive());
            held.addAll(c.previousStandby());
            heldBefore.put(c.processId(), held);
        }
        for (Task task : pending) {
            budget = keepCaughtUpCopies(placement, lags, task, owners.get(task), copies, heldBefore, budget);
        }
        // Last in line for the budget (target owners and K1 come first), lenders restore beside the owner: without
        // this, a lender would wait a whole probing interval after the move before it starts.
        for (Map.Entry<String, Task> lent : lenders) {
            if (budget > 0 && !placement.holds(lent.getKey(), lent.getValue())) {
                budget--;
                placement.warmup.get(lent.getKey()).add(lent.getValue());
            }
        }
        for (Task task : group.statelessTasks()) {
            placement.assignActive(owners.get(task), task);
        }
        Map<String, ClientTasks> live = placement.freeze();
        return new LiveAssignment(live, !live.equals(withoutWarmups(target)));
    }

    /**
     * K1: while fewer than min(c, copies) replicas sit on the task's c caught-up clients, a standby that must still
     * restore hands its slot back to a caught-up copy and warms up instead (budget permitting). KIP-441 drops a
     * caught-up standby only once its replacement has caught up. Returns the warmup budget left.
     */
    private static int keepCaughtUpCopies(Placement placement, LagIndex lags, Task task, String owner, int copies,
            Map<String, Set<Task>> heldBefore, int budget) {
        List<String> caughtUp = lags.caughtUpClients(task);
        if (caughtUp.isEmpty()) {
            return budget;
        }
        int kept = 0;
        List<String> spare = new ArrayList<>();
        for (String p : caughtUp) {
            if (placement.holds(p, task)) {
                kept++;
            } else {
                spare.add(p);
            }
        }
        int missing = Math.min(caughtUp.size(), copies) - kept;
        if (missing <= 0) {
            return budget;
        }
        List<String> cold = new ArrayList<>();
        for (String p : placement.processIds) {
            if (placement.standby.get(p).contains(task) && !lags.caughtUp(p, task)) {
                cold.add(p);
            }
        }
        // Target standbys give way before the target owner (its move is what the plan is waiting for), the
        // least caught up first.
        cold.sort((a, b) -> {
            int c = Boolean.compare(a.equals(owner), b.equals(owner));
            if (c == 0) {
                c = lags.rank(b, task).compareTo(lags.rank(a, task));
            }
            return c != 0 ? c : CodePoints.compare(a, b);
        });
        for (String giver : cold.subList(0, Math.min(missing, cold.size()))) {
            String keeper = null;
            for (String p : spare) {
                if (keeper == null || keeperBefore(placement, heldBefore, task, p, keeper)) {
                    keeper = p;
                }
            }
            spare.remove(keeper);
            placement.standby.get(giver).remove(task);
            placement.standby.get(keeper).add(task);
            if (budget > 0) {
                budget--;
                placement.warmup.get(giver).add(task);
            }
        }
        return budget;
    }

    /** Whether {@code p} keeps a caught-up copy before {@code q}: a copy it ran already, then the lighter load. */
    private static boolean keeperBefore(Placement placement, Map<String, Set<Task>> heldBefore, Task task, String p,
            String q) {
        boolean pHeld = heldBefore.get(p).contains(task);
        boolean qHeld = heldBefore.get(q).contains(task);
        if (pHeld != qHeld) {
            return pHeld;
        }
        int c = Double.compare(placement.assignedLoad(p), placement.assignedLoad(q));
        return c < 0 || (c == 0 && CodePoints.compare(p, q) < 0);
    }

    /** Where a task stays active while its target owner restores: H1-safe, least disruptive. */
    private static String keeper(Placement placement, LagIndex lags, Task task, Set<String> standbys) {
        List<String> caughtUp = lags.caughtUpClients(task);
        Set<String> previous = placement.previousOwnerOf(task);
        if (!caughtUp.isEmpty()) {
            for (String p : caughtUp) {
                if (previous.contains(p)) {
                    return p;
                }
            }
            List<String> inTargetStandbys = new ArrayList<>();
            for (String p : caughtUp) {
                if (standbys.contains(p)) {
                    inTargetStandbys.add(p);
                }
            }
            return placement.leastLoaded(inTargetStandbys.isEmpty() ? caughtUp : inTargetStandbys);
        }
        LagIndex.Rank best = lags.bestRank(task);
        List<String> tied = new ArrayList<>();
        for (String p : placement.processIds) {
            if (lags.rank(p, task).equals(best)) {
                tied.add(p);
            }
        }
        for (String p : tied) {
            if (previous.contains(p)) {
                return p;
            }
        }
        return tied.get(0);
    }

    private static Map<String, ClientTasks> withoutWarmups(Map<String, ClientTasks> target) {
        Map<String, ClientTasks> out = new HashMap<>();
        for (Map.Entry<String, ClientTasks> e : target.entrySet()) {
            out.put(e.getKey(), new ClientTasks(e.getValue().active(), e.getValue().standby(), new TreeSet<>()));
        }
        return out;
    }
}
