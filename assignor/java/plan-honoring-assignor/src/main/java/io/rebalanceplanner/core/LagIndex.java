package io.rebalanceplanner.core;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * Per-client lags with Kafka Streams' semantics: {@value #LATEST_OFFSET} a running active (caught up by
 * definition), {@value #UNKNOWN_OFFSET_SUM} state of unknown size (never caught up, ranked ahead of every
 * known lag, as Kafka does).
 *
 * <p>Dense, as KIP-924's {@code statefulTasksToLagSums} gives it: every client has a lag for every stateful
 * task, and a client without state lags the whole changelog. Python's LagIndex is sparse (only reported offset
 * sums, everyone else at the changelog end) and uses the end offsets only to short-cut the same questions, so
 * every answer here equals Python's without knowing end offsets or who reported what. Per-task answers are
 * memoized: an index lives for one assignor call and its lags do not change.
 */
public final class LagIndex {
    public static final long LATEST_OFFSET = -2L;
    public static final long UNKNOWN_OFFSET_SUM = -3L;

    /** How caught up a client is on a task, smaller is better: caught-up clients first, then by lag. */
    public static final class Rank implements Comparable<Rank> {
        private final int tier;
        private final long lag;

        Rank(int tier, long lag) {
            this.tier = tier;
            this.lag = lag;
        }

        public boolean caughtUp() {
            return tier == 0;
        }

        @Override
        public int compareTo(Rank o) {
            int c = Integer.compare(tier, o.tier);
            return c != 0 ? c : Long.compare(lag, o.lag);
        }

        @Override
        public boolean equals(Object o) {
            return o instanceof Rank && compareTo((Rank) o) == 0;
        }

        @Override
        public int hashCode() {
            return tier * 31 + Long.hashCode(lag);
        }

        @Override
        public String toString() {
            return "(" + tier + ", " + lag + ")";
        }
    }

    private final List<String> processIds;
    private final Map<String, Map<Task, Long>> lags;
    private final Map<Task, Long> ends;
    private final long acceptableRecoveryLag;
    private final Map<Task, Rank> bestRanks = new HashMap<>();
    private final Map<Task, List<String>> caughtUp = new HashMap<>();
    /** Task to the clients with a lag of their own for it, in process-id order; built on first use. */
    private Map<Task, List<String>> reporters;

    /**
     * @param processIds every client, sorted by code point
     * @param lags process id to task to lag (dense, as Kafka's statefulTasksToLagSums gives it)
     * @param ends changelog end offset sums, used only for a lag a client did not report (as Python does)
     */
    public LagIndex(List<String> processIds, Map<String, Map<Task, Long>> lags, Map<Task, Long> ends,
            long acceptableRecoveryLag) {
        this.processIds = List.copyOf(processIds);
        this.lags = lags;
        this.ends = ends;
        this.acceptableRecoveryLag = acceptableRecoveryLag;
    }

    public static boolean isCaughtUp(long lag, long acceptableRecoveryLag) {
        return lag == LATEST_OFFSET || (lag >= 0 && lag <= acceptableRecoveryLag);
    }

    public long lag(String processId, Task task) {
        Map<Task, Long> client = lags.get(processId);
        Long lag = client == null ? null : client.get(task);
        return lag != null ? lag : ends.getOrDefault(task, 0L);
    }

    public boolean caughtUp(String processId, Task task) {
        return isCaughtUp(lag(processId, task), acceptableRecoveryLag);
    }

    public Rank rank(String processId, Task task) {
        long lag = lag(processId, task);
        return new Rank(isCaughtUp(lag, acceptableRecoveryLag) ? 0 : 1, lag);
    }

    /** The rank of the most caught-up client of the task. */
    public Rank bestRank(Task task) {
        return bestRanks.computeIfAbsent(task, this::computeBestRank);
    }

    /**
     * Every client without a lag of its own has the same one (the changelog end), so only the reporters need a
     * look each: the broker assignor passes lags sparse, and a 100-client group then costs a few lookups per task.
     */
    private Rank computeBestRank(Task task) {
        List<String> own = reportersOf(task);
        Rank best = null;
        for (String pid : own) {
            Rank r = rank(pid, task);
            if (best == null || r.compareTo(best) < 0) {
                best = r;
            }
        }
        if (own.size() < processIds.size()) {
            long end = ends.getOrDefault(task, 0L);
            Rank r = new Rank(isCaughtUp(end, acceptableRecoveryLag) ? 0 : 1, end);
            if (best == null || r.compareTo(best) < 0) {
                best = r;
            }
        }
        return best;
    }

    private List<String> reportersOf(Task task) {
        if (reporters == null) {
            reporters = new HashMap<>();
            for (String pid : processIds) {
                Map<Task, Long> client = lags.get(pid);
                if (client != null) {
                    for (Task t : client.keySet()) {
                        reporters.computeIfAbsent(t, k -> new ArrayList<>()).add(pid);
                    }
                }
            }
        }
        return reporters.getOrDefault(task, List.of());
    }

    /** Every caught-up client of the task, in process-id order (unmodifiable). */
    public List<String> caughtUpClients(Task task) {
        return caughtUp.computeIfAbsent(task, t -> {
            List<String> own = reportersOf(t);
            // When a client without state is caught up (a short changelog), every client must be looked at.
            boolean everyone = own.size() < processIds.size()
                    && isCaughtUp(ends.getOrDefault(t, 0L), acceptableRecoveryLag);
            List<String> found = new ArrayList<>();
            for (String pid : everyone ? processIds : own) {
                if (caughtUp(pid, t)) {
                    found.add(pid);
                }
            }
            return List.copyOf(found);
        });
    }

    /**
     * Whether the client's copy of the task should move (Python's {@code needing_movement}, one pair): it is not
     * caught up and some client ranks strictly better. Not "caught up" alone: when nobody is, the most caught-up
     * clients keep what they have.
     */
    public boolean needsMovement(String processId, Task task) {
        Rank mine = rank(processId, task);
        return !mine.caughtUp() && bestRank(task).compareTo(mine) < 0;
    }

    /** The candidate with the best rank on the task, ties by process id; null when there is none. */
    public String mostCaughtUp(Task task, List<String> candidates) {
        String best = null;
        Rank bestRank = null;
        for (String p : candidates) {
            Rank r = rank(p, task);
            int c = best == null ? -1 : r.compareTo(bestRank);
            if (c < 0 || (c == 0 && CodePoints.compare(p, best) < 0)) {
                best = p;
                bestRank = r;
            }
        }
        return best;
    }
}
