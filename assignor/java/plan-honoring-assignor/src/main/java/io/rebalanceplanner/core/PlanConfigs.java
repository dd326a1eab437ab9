package io.rebalanceplanner.core;

import java.util.List;

/**
 * The KIP-441 settings a plan was made with; the leader honors the plan with these, not its own. The
 * fallback ({@link HighAvailability}) runs with the application's own settings, which add the rack tags.
 */
public final class PlanConfigs {
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
