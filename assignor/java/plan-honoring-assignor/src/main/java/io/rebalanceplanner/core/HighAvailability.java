package io.rebalanceplanner.core;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * The KIP-441 baseline: Kafka Streams' HighAvailabilityTaskAssignor (rack-aware optimization off, tag-aware
 * standbys on), ported from Python's {@code assign_high_availability}. Kafka 4.4.0 keeps its own assignor
 * internal, so this is the plugin's fallback whenever no plan is honored.
 *
 * <p>The shared vectors (schemas/vectors/high_availability_cases.json) hold both to the same output, tie-breaks
 * included, so change the two together. The three steps stay apart: {@link Balance} and {@link Standbys} build
 * the balanced placement from clients, capacities and tags only; {@link Movement} then consults the lags and
 * keeps copies on caught-up clients, spending warmups; stateless actives are dealt last, by active load.
 */
public final class HighAvailability {
    private HighAvailability() {}

    /**
     * @param lags process id to task to lag, dense: every client on every stateful task, as KIP-924's
     *     {@code statefulTasksToLagSums} gives it (no offset sums or end offsets needed; see {@link LagIndex})
     */
    public static LiveAssignment assign(LiveGroup group, PlanConfigs configs, Map<String, Map<Task, Long>> lags) {
        List<Task> stateful = new ArrayList<>(group.statefulTasks());
        Placement placement = new Placement(group);
        for (String pid : placement.processIds) {
            if (placement.capacity.get(pid) < 1) {
                throw new IllegalArgumentException("client " + pid + " has capacity " + placement.capacity.get(pid));
            }
            Map<Task, Long> mine = lags.get(pid);
            for (Task task : stateful) {
                if (mine == null || mine.get(task) == null) {
                    // Without the end offset a missing lag cannot be told apart from "caught up": refuse.
                    throw new IllegalArgumentException("no lag for client " + pid + " on stateful task " + task);
                }
            }
        }
        LagIndex index = new LagIndex(placement.processIds, lags, Map.of(), configs.acceptableRecoveryLag());
        Balance.dealActives(placement, stateful);
        Standbys.place(placement, stateful, configs.numStandbyReplicas(), configs.rackAwareAssignmentTags());
        Movement.WarmupBudget budget = new Movement.WarmupBudget(configs.maxWarmupReplicas());
        int activeMoves = Movement.moveActives(placement, index, stateful, budget);
        int standbyMoves = Movement.moveStandbys(placement, index, budget);
        Balance.dealActives(placement, group.statelessTasks());
        return new LiveAssignment(placement.freeze(), activeMoves + standbyMoves > 0);
    }
}
