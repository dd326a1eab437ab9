package io.rebalanceplanner.core;

import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;

/**
 * Movements (KIP-441): keep actives and standbys on caught-up clients and warm up the clients the balanced
 * placement chose (Python: movement.py). Works on a {@link Placement} that already holds the balanced actives
 * and standbys; only the lags decide what moves.
 */
final class Movement {
    /** Warmup replicas still allowed in this assignment (max.warmup.replicas, shared by all movements). */
    static final class WarmupBudget {
        private int remaining;

        WarmupBudget(int remaining) {
            this.remaining = remaining;
        }

        /** Use one warmup if any is left. */
        boolean take() {
            if (remaining <= 0) {
                return false;
            }
            remaining--;
            return true;
        }
    }

    /** A copy of a task on a client the balanced placement chose but which is not caught up. */
    private static final class Move {
        final Task task;
        final String chosen;
        /** The task's caught-up clients, in process-id order (fixed: lags do not change during the call). */
        final List<String> caughtUp;

        Move(Task task, String chosen, List<String> caughtUp) {
            this.task = task;
            this.chosen = chosen;
            this.caughtUp = caughtUp;
        }
    }

    /**
     * Python sorts {@code (len(caught_up), task, chosen, caught_up)} tuples: tasks with the fewest places to go
     * first. (task, chosen) is unique among moves, so the list never decides.
     */
    private static final Comparator<Move> FEWEST_CAUGHT_UP_FIRST = Comparator
            .<Move>comparingInt(m -> m.caughtUp.size())
            .thenComparing(m -> m.task)
            .thenComparing(m -> m.chosen, CodePoints.ORDER);

    private Movement() {}

    private static List<Move> byFewestCaughtUp(List<Move> moves) {
        List<Move> sorted = new ArrayList<>(moves);
        sorted.sort(FEWEST_CAUGHT_UP_FIRST);
        return sorted;
    }

    private static void swapStandbyAndActive(Placement placement, Task task, String standbyHolder, String chosen) {
        placement.standby.get(standbyHolder).remove(task);
        placement.assignActive(standbyHolder, task);
        placement.unassignActive(chosen, task);
        placement.standby.get(chosen).add(task);
    }

    private static void moveActiveAndWarmUp(Placement placement, Task task, String source, String chosen,
            WarmupBudget budget) {
        placement.unassignActive(chosen, task);
        placement.assignActive(source, task);
        // Without budget the active still stays on the caught-up client (H1); the chosen one just waits.
        if (budget.take()) {
            placement.warmup.get(chosen).add(task);
        }
    }

    /** Keep each active on a caught-up client when its chosen one is not; return how many moves were needed. */
    static int moveActives(Placement placement, LagIndex lags, List<Task> statefulTasks, WarmupBudget budget) {
        List<Move> moves = new ArrayList<>();
        for (Task task : statefulTasks) {
            String chosen = placement.owner.get(task);
            if (lags.needsMovement(chosen, task)) {
                moves.add(new Move(task, chosen, lags.caughtUpClients(task)));
            }
        }
        for (Move m : byFewestCaughtUp(moves)) {
            Task task = m.task;
            List<String> caughtUp = m.caughtUp;
            if (caughtUp.size() == 1 && !placement.standby.get(caughtUp.get(0)).contains(task)) {
                // The common case, short-cut: the one caught-up client (usually the owner so far) keeps the task.
                moveActiveAndWarmUp(placement, task, caughtUp.get(0), m.chosen, budget);
                continue;
            }
            // A caught-up standby takes over and the chosen client becomes its standby: no warmup spent.
            List<String> standbyHolders = new ArrayList<>();
            for (String p : caughtUp) {
                if (placement.standby.get(p).contains(task)) {
                    standbyHolders.add(p);
                }
            }
            String swapWith = placement.leastLoaded(standbyHolders);
            if (swapWith != null) {
                swapStandbyAndActive(placement, task, swapWith, m.chosen);
                continue;
            }
            List<String> others = new ArrayList<>();
            for (String p : caughtUp) {
                if (!p.equals(m.chosen)) {
                    others.add(p);
                }
            }
            String source = placement.leastLoaded(others);
            if (source == null) {
                // Nobody is caught up: the most caught-up client runs it (H1's minimum lag).
                List<String> rest = new ArrayList<>();
                for (String p : placement.processIds) {
                    if (!p.equals(m.chosen)) {
                        rest.add(p);
                    }
                }
                source = lags.mostCaughtUp(task, rest);
            }
            if (source == null) {
                throw new IllegalStateException("no client is more caught up on " + task + " than " + m.chosen);
            }
            if (placement.standby.get(source).contains(task)) {
                swapStandbyAndActive(placement, task, source, m.chosen);
            } else {
                moveActiveAndWarmUp(placement, task, source, m.chosen, budget);
            }
        }
        return moves.size();
    }

    /** Put standbys on caught-up clients, warming up the chosen ones while budget lasts; return the moves. */
    static int moveStandbys(Placement placement, LagIndex lags, WarmupBudget budget) {
        List<Move> moves = new ArrayList<>();
        for (String pid : placement.processIds) {
            for (Task task : placement.standby.get(pid)) {
                if (lags.needsMovement(pid, task)) {
                    moves.add(new Move(task, pid, lags.caughtUpClients(task)));
                }
            }
        }
        int needed = 0;
        for (Move m : byFewestCaughtUp(moves)) {
            Task task = m.task;
            LagIndex.Rank chosenRank = lags.rank(m.chosen, task);
            List<String> freeCaughtUp = new ArrayList<>();
            for (String p : m.caughtUp) {
                if (!placement.holds(p, task)) {
                    freeCaughtUp.add(p);
                }
            }
            String source = placement.leastLoaded(freeCaughtUp);
            if (source == null) {
                List<String> better = new ArrayList<>();
                for (String p : placement.processIds) {
                    if (!placement.holds(p, task) && lags.rank(p, task).compareTo(chosenRank) < 0) {
                        better.add(p);
                    }
                }
                source = lags.mostCaughtUp(task, better);
            }
            if (source == null) {
                continue; // every more caught-up client already holds a copy: nowhere better to put it
            }
            placement.standby.get(m.chosen).remove(task);
            placement.standby.get(source).add(task);
            if (budget.take()) {
                placement.warmup.get(m.chosen).add(task);
            }
            needed++;
        }
        return needed;
    }
}
