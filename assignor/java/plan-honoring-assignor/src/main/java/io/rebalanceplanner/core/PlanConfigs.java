package io.rebalanceplanner.core;

import java.util.List;

/**
 * The KIP-441 settings a plan was made with; the leader honors the plan with these, not its own. The
 * fallback ({@link HighAvailability}) runs with the application's own settings, which add the rack tags.
 */
public final class PlanConfigs {
    /**
     * The four settings a plan carries, with the lower and upper bounds schemas/kip441_settings.json defines for
     * every part (a JUnit test reads that file and checks these). Plans beyond them are refused by
     * {@link PlanVerifier}; the application's own settings (the fallback's) need only Kafka's lower bounds.
     */
    public static final List<String> NAMES = List.of(
            "acceptable_recovery_lag", "max_warmup_replicas", "num_standby_replicas", "probing_rebalance_interval_ms");
    private static final long[] MINIMUMS = {0, 1, 0, 1000};
    // 2^53 - 1: exact in every JSON reader; 1000 copies; 7 days, so now + interval never overflows a long.
    private static final long[] MAXIMUMS = {9_007_199_254_740_991L, 1000, 1000, 604_800_000L};

    /** The lower bound of {@code NAMES.get(i)}. */
    public static long minimum(int i) {
        return MINIMUMS[i];
    }

    /** The upper bound of {@code NAMES.get(i)}. */
    public static long maximum(int i) {
        return MAXIMUMS[i];
    }

    private final long acceptableRecoveryLag;
    private final int maxWarmupReplicas;
    private final int numStandbyReplicas;
    private final long probingRebalanceIntervalMs;
    private final List<String> rackAwareAssignmentTags;

    public PlanConfigs(
            long acceptableRecoveryLag, int maxWarmupReplicas, int numStandbyReplicas, long probingRebalanceIntervalMs) {
        this(acceptableRecoveryLag, maxWarmupReplicas, numStandbyReplicas, probingRebalanceIntervalMs, List.of());
    }

    /** @param rackAwareAssignmentTags {@code rack.aware.assignment.tags}, in configured order (plans carry none) */
    public PlanConfigs(long acceptableRecoveryLag, int maxWarmupReplicas, int numStandbyReplicas,
            long probingRebalanceIntervalMs, List<String> rackAwareAssignmentTags) {
        if (acceptableRecoveryLag < 0 || maxWarmupReplicas < 1 || numStandbyReplicas < 0
                || probingRebalanceIntervalMs < 1000) {
            throw new IllegalArgumentException("configs out of range");
        }
        for (String tag : rackAwareAssignmentTags) {
            if (tag == null || tag.isEmpty()) {
                throw new IllegalArgumentException("rack aware assignment tags must be non-empty strings");
            }
        }
        this.acceptableRecoveryLag = acceptableRecoveryLag;
        this.maxWarmupReplicas = maxWarmupReplicas;
        this.numStandbyReplicas = numStandbyReplicas;
        this.probingRebalanceIntervalMs = probingRebalanceIntervalMs;
        this.rackAwareAssignmentTags = List.copyOf(rackAwareAssignmentTags);
    }

    public long acceptableRecoveryLag() {
        return acceptableRecoveryLag;
    }

    public int maxWarmupReplicas() {
        return maxWarmupReplicas;
    }

    public int numStandbyReplicas() {
        return numStandbyReplicas;
    }

    public long probingRebalanceIntervalMs() {
        return probingRebalanceIntervalMs;
    }

    public List<String> rackAwareAssignmentTags() {
        return rackAwareAssignmentTags;
    }
}
