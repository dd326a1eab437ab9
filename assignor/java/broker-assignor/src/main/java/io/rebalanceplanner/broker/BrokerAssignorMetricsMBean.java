package io.rebalanceplanner.broker;

/** JMX view of {@link BrokerAssignorMetrics}: {@code io.rebalanceplanner:type=BrokerAssignor}. */
public interface BrokerAssignorMetricsMBean {
    long getAssignments();

    long getPlansHonored();

    /** Assignments that gave Kafka's sticky result with a reason (no_plan included). */
    long getFallbacks();

    /** {@code code=count} pairs, sorted by code. */
    String getFallbacksByReason();

    String getLastFallbackReason();

    int getCachedGroups();

    boolean isPlansLoaded();

    long getRejectedPlanRecords();

    long getDecisionsNotPublished();
}
