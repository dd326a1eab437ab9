package io.rebalanceplanner.core;

import java.util.Map;

/**
 * One rebalance's assignment, from honoring a plan or from the KIP-441 fallback, and whether another rebalance
 * must follow it.
 *
 * @param assignment process id (code-point order) to its tasks, warmups apart from the configured standbys
 * @param followupRebalance true while the group has not reached where it is going: a probing rebalance follows
 */
public record LiveAssignment(Map<String, ClientTasks> assignment, boolean followupRebalance) {}
