package io.rebalanceplanner.broker;

import java.util.Map;
import java.util.StringJoiner;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.LongAdder;
import java.util.function.Supplier;

/** Counters of one assignor instance, safe to bump from every coordinator thread at once. */
public final class BrokerAssignorMetrics implements BrokerAssignorMetricsMBean {
    /** Reason codes are ours and few; anything beyond this many distinct codes is counted as "other". */
    private static final int MAX_CODES = 64;

    private final LongAdder assignments = new LongAdder();
    private final LongAdder honored = new LongAdder();
    private final LongAdder fallbacks = new LongAdder();
    private final LongAdder notPublished = new LongAdder();
    private final Map<String, LongAdder> byReason = new ConcurrentHashMap<>();
    private volatile String lastFallbackReason;
    private final Supplier<PlanCache> cache;

    BrokerAssignorMetrics(Supplier<PlanCache> cache) {
        this.cache = cache;
    }

    void recordHonored() {
        assignments.increment();
        honored.increment();
    }

    void recordFallback(String code, String reason) {
        assignments.increment();
        fallbacks.increment();
        String key = byReason.containsKey(code) || byReason.size() < MAX_CODES ? code : "other";
        byReason.computeIfAbsent(key, k -> new LongAdder()).increment();
        lastFallbackReason = reason;
    }

    void recordNotPublished() {
        notPublished.increment();
    }

    @Override
    public long getAssignments() {
        return assignments.sum();
    }

    @Override
    public long getPlansHonored() {
        return honored.sum();
    }

    @Override
    public long getFallbacks() {
        return fallbacks.sum();
    }

    /** Count of fallbacks with this reason code. */
    public long fallbacks(String code) {
        LongAdder n = byReason.get(code);
        return n == null ? 0 : n.sum();
    }

    @Override
    public String getFallbacksByReason() {
        StringJoiner out = new StringJoiner(",");
        new TreeMap<>(byReason).forEach((code, n) -> out.add(code + "=" + n.sum()));
        return out.toString();
    }

    @Override
    public String getLastFallbackReason() {
        return lastFallbackReason;
    }

    @Override
    public int getCachedGroups() {
        PlanCache c = cache.get();
        return c == null ? 0 : c.snapshot().size();
    }

    @Override
    public boolean isPlansLoaded() {
        PlanCache c = cache.get();
        return c != null && c.snapshot().loaded();
    }

    @Override
    public long getRejectedPlanRecords() {
        PlanCache c = cache.get();
        return c == null ? 0 : c.rejectedRecords();
    }

    @Override
    public long getDecisionsNotPublished() {
        return notPublished.sum();
    }
}
