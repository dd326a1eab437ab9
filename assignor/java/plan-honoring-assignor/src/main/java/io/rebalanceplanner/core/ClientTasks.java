package io.rebalanceplanner.core;

import java.util.Collections;
import java.util.Set;
import java.util.SortedSet;
import java.util.TreeSet;

/** One client's tasks by role; a plan's target has no warmups. */
public final class ClientTasks {
    private final SortedSet<Task> active;
    private final SortedSet<Task> standby;
    private final SortedSet<Task> warmup;

    public ClientTasks(Set<Task> active, Set<Task> standby, Set<Task> warmup) {
        this.active = Collections.unmodifiableSortedSet(new TreeSet<>(active));
        this.standby = Collections.unmodifiableSortedSet(new TreeSet<>(standby));
        this.warmup = Collections.unmodifiableSortedSet(new TreeSet<>(warmup));
    }

    public SortedSet<Task> active() {
        return active;
    }

    public SortedSet<Task> standby() {
        return standby;
    }

    public SortedSet<Task> warmup() {
        return warmup;
    }

    @Override
    public boolean equals(Object o) {
        if (!(o instanceof ClientTasks)) {
            return false;
        }
        ClientTasks c = (ClientTasks) o;
        return active.equals(c.active) && standby.equals(c.standby) && warmup.equals(c.warmup);
    }

    @Override
    public int hashCode() {
        return active.hashCode() * 961 + standby.hashCode() * 31 + warmup.hashCode();
    }

    @Override
    public String toString() {
        return "{active=" + active + ", standby=" + standby + ", warmup=" + warmup + "}";
    }
}
