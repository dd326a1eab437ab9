package io.rebalanceplanner.core;

import java.util.regex.Matcher;
import java.util.regex.Pattern;

/** A task id, {@code "<subtopology>_<partition>"}, ordered by (subtopology, partition) like Python's TaskId. */
public final class Task implements Comparable<Task> {
    // At most ten digits a part, so a hostile id of thousands of digits is refused by its form before any
    // conversion; the int32 range is checked by parseInt. Python's TaskId.parse uses the same bounds.
    private static final Pattern FORM = Pattern.compile("(0|[1-9][0-9]{0,9})_(0|[1-9][0-9]{0,9})");

    private final long subtopology;
    private final long partition;

    public Task(long subtopology, long partition) {
        this.subtopology = subtopology;
        this.partition = partition;
    }

    /** The task id, or null when the text is not one (no leading zeros or signs, each part a non-negative int32). */
    public static Task parseOrNull(String text) {
        Matcher m = FORM.matcher(text);
        if (!m.matches()) {
            return null;
        }
        // Kafka's TaskId holds two int32s; anything larger can never name a live task.
        try {
            return new Task(Integer.parseInt(m.group(1)), Integer.parseInt(m.group(2)));
        } catch (NumberFormatException e) {
            return null;
        }
    }

    public long subtopology() {
        return subtopology;
    }

    public long partition() {
        return partition;
    }

    @Override
    public int compareTo(Task o) {
        int c = Long.compare(subtopology, o.subtopology);
        return c != 0 ? c : Long.compare(partition, o.partition);
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof Task && ((Task) o).subtopology == subtopology && ((Task) o).partition == partition;
    }

    @Override
    public int hashCode() {
        return Long.hashCode(subtopology) * 31 + Long.hashCode(partition);
    }

    @Override
    public String toString() {
        return subtopology + "_" + partition;
    }
}
