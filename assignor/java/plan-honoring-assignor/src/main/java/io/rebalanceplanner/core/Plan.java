package io.rebalanceplanner.core;

import java.util.List;
import java.util.Map;

/** A verified, approved plan: what the group should converge to and in which order to warm tasks up. */
public final class Plan {
    private final String planId;
    private final String groupId;
    private final long createdAt;
    private final long validUntil;
    private final PlanConfigs configs;
    private final Map<String, ClientTasks> target;
    private final List<Task> moveOrder;
    private final long sequence;

    public Plan(String planId, String groupId, long createdAt, long validUntil, PlanConfigs configs,
            Map<String, ClientTasks> target, List<Task> moveOrder) {
        this(planId, groupId, createdAt, validUntil, configs, target, moveOrder, createdAt);
    }

    public Plan(String planId, String groupId, long createdAt, long validUntil, PlanConfigs configs,
            Map<String, ClientTasks> target, List<Task> moveOrder, long sequence) {
        this.sequence = sequence;
        this.planId = planId;
        this.groupId = groupId;
        this.createdAt = createdAt;
        this.validUntil = validUntil;
        this.configs = configs;
        this.target = Map.copyOf(target);
        this.moveOrder = List.copyOf(moveOrder);
    }

    public String planId() {
        return planId;
    }

    public String groupId() {
        return groupId;
    }

    public long createdAt() {
        return createdAt;
    }

    public long validUntil() {
        return validUntil;
    }

    public PlanConfigs configs() {
        return configs;
    }

    /** Process id to its target tasks (no warmups). */
    public Map<String, ClientTasks> target() {
        return target;
    }

    public List<Task> moveOrder() {
        return moveOrder;
    }

    /** The per-group sequence publish assigned: a leader never honors one lower than the highest it knows. */
    public long sequence() {
        return sequence;
    }
}
