package io.rebalanceplanner.core;

/** The KIP-441 settings a plan was made with; the leader honors the plan with these, not its own. */
public final class PlanConfigs {
    private final long acceptableRecoveryLag;
    private final int maxWarmupReplicas;
    private final int numStandbyReplicas;
    private final long probingRebalanceIntervalMs;

    public PlanConfigs(
            long acceptableRecoveryLag, int maxWarmupReplicas, int numStandbyReplicas, long probingRebalanceIntervalMs) {
        if (acceptableRecoveryLag < 0 || maxWarmupReplicas < 1 || numStandbyReplicas < 0
                || probingRebalanceIntervalMs < 1000) {
            throw new IllegalArgumentException("configs out of range");
        }
        this.acceptableRecoveryLag = acceptableRecoveryLag;
        this.maxWarmupReplicas = maxWarmupReplicas;
        this.numStandbyReplicas = numStandbyReplicas;
        this.probingRebalanceIntervalMs = probingRebalanceIntervalMs;
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
}
