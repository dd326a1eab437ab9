package io.rebalanceplanner.core;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * Per-client lags with Kafka Streams' semantics: {@value #LATEST_OFFSET} a running active (caught up by
 * definition), {@value #UNKNOWN_OFFSET_SUM} state of unknown size (never caught up, ranked ahead of every
 * known lag, as Kafka does).
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

    public Rank bestRank(Task task) {
        Rank best = null;
        for (String pid : processIds) {
            Rank r = rank(pid, task);
            if (best == null || r.compareTo(best) < 0) {
                best = r;
            }
        }
        return best;
    }

    /** Every caught-up client of the task, in process-id order. */
    public List<String> caughtUpClients(Task task) {
        List<String> found = new ArrayList<>();
        for (String pid : processIds) {
            if (caughtUp(pid, task)) {
                found.add(pid);
            }
        }
        return found;
    }
}
