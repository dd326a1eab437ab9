package io.rebalanceplanner.core;

import java.util.PriorityQueue;

/** Balanced active placement by capacity, ignoring history the way Kafka's HA assignor does (Python: balance.py). */
final class Balance {
    /** A client's active load when it was last dealt a task; one entry per client, so keys stay current. */
    private static final class Entry implements Comparable<Entry> {
        final double load;
        final String pid;

        Entry(double load, String pid) {
            this.load = load;
            this.pid = pid;
        }

        @Override
        public int compareTo(Entry o) {
            int c = Double.compare(load, o.load);
            return c != 0 ? c : CodePoints.compare(pid, o.pid);
        }
    }

    private Balance() {}

    /**
     * Give each task, in order, to the client with the lowest active load (ties by process id). Clients of equal
     * capacity are served in a fixed cycle, so each subtopology (a contiguous run of sorted tasks) is spread evenly
     * over them (B2), and loads per capacity never differ by more than one (B1).
     */
    static void dealActives(Placement placement, Iterable<Task> tasks) {
        PriorityQueue<Entry> heap = new PriorityQueue<>();
        for (String p : placement.processIds) {
            heap.add(new Entry(placement.activeLoad(p), p));
        }
        for (Task task : tasks) {
            String pid = heap.poll().pid;
            placement.assignActive(pid, task);
            heap.add(new Entry(placement.activeLoad(pid), pid));
        }
    }
}
