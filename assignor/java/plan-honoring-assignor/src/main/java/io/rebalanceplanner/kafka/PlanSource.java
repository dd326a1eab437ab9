package io.rebalanceplanner.kafka;

/** Where the newest plan record of a group comes from (the plans topic; a fake in tests). */
public interface PlanSource {
    /**
     * The value of the newest record keyed by the group id, or null when there is none.
     *
     * @throws PlansUnreadableException when the topic could not be read within the timeout
     */
    byte[] newest(String groupId, long timeoutMs) throws PlansUnreadableException;
}
