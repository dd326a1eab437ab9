package io.rebalanceplanner;

import io.rebalanceplanner.kafka.PlannerSettings;
import java.time.Instant;

/** When the group should rebalance next, and how the log names it. */
final class Followups {
    private Followups() {}

    /**
     * The probing deadline while copies still move, and at the latest the next plan check, which in a settled
     * group changes nothing and so revokes nothing; null when neither applies.
     */
    static Instant at(long now, boolean moving, long probingIntervalMs, PlannerSettings settings) {
        long at = moving ? now + probingIntervalMs : Long.MAX_VALUE;
        if (settings != null && settings.planCheckIntervalMs() > 0) {
            at = Math.min(at, now + settings.planCheckIntervalMs());
        }
        return at == Long.MAX_VALUE ? null : Instant.ofEpochMilli(at);
    }

    /** The follow-up as the log names it: when, and whether copies still move or only the plan check is due. */
    static String describe(boolean moving, Instant at) {
        if (at == null) {
            return "none scheduled";
        }
        return at + (moving ? " (copies still moving)" : " (plan check)");
    }
}
