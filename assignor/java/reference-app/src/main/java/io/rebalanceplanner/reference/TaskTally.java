package io.rebalanceplanner.reference;

import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Per-task counts since the last emission, written as one {@code event} line ({@code tasks}: task to count) at
 * most once a second: a line per record or per batch would flood the events file.
 */
final class TaskTally {
    private final Events events;
    private final String event;
    private final Map<String, AtomicLong> sinceLast = new ConcurrentHashMap<>();
    private volatile long lastEmit = System.currentTimeMillis();

    TaskTally(Events events, String event) {
        this.events = events;
        this.event = event;
    }

    void add(String task, long n) {
        sinceLast.computeIfAbsent(task, k -> new AtomicLong()).addAndGet(n);
    }

    void maybeEmit() {
        if (System.currentTimeMillis() - lastEmit >= 1000) {
            flush();
        }
    }

    synchronized void flush() {
        lastEmit = System.currentTimeMillis();
        Map<String, Long> out = new TreeMap<>();
        for (Map.Entry<String, AtomicLong> e : sinceLast.entrySet()) {
            long n = e.getValue().getAndSet(0);
            if (n > 0) {
                out.put(e.getKey(), n);
            }
        }
        if (!out.isEmpty()) {
            events.emit(event, "tasks", out);
        }
    }
}
