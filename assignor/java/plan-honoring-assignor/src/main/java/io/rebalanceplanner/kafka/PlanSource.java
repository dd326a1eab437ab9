package io.rebalanceplanner.kafka;

import java.util.List;

/** Where a group's plan records come from (the plans topic; a fake in tests). */
public interface PlanSource {
    /**
     * The value of the newest record keyed by the group id, or null when there is none.
     *
     * @throws PlansUnreadableException when the topic could not be read within the timeout
     */
    byte[] newest(String groupId, long timeoutMs) throws PlansUnreadableException;

    /**
     * The group's records not handed out before, in topic order (values; null for a tombstone): the first call
     * reads from the log start. The caller folds them into its PlanLedger. By default the newest record alone.
     *
     * @throws PlansUnreadableException when the topic could not be read within the timeout
     */
    default List<byte[]> records(String groupId, long timeoutMs) throws PlansUnreadableException {
        byte[] newest = newest(groupId, timeoutMs);
        return newest == null ? List.of() : java.util.Collections.singletonList(newest);
    }

    /**
     * The key-revocation records (KeyRevocation) met so far, every one since the first read: revocations are never
     * undone, so they are kept even when the topic compacts them away. None by default.
     */
    default List<byte[]> revocations() {
        return List.of();
    }
}
