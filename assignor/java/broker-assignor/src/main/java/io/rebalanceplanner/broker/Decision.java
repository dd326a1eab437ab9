package io.rebalanceplanner.broker;

import io.rebalanceplanner.core.CanonicalJson;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * What the assignor decided for one group at one assignment, published (off the coordinator thread) to the
 * decisions topic so that extract can carry it into the group's next state in the lake. Schema:
 * {@code schemas/broker_assignor_decision.schema.json}.
 *
 * @param groupId the group, when a plan or the group tag named it; else null (join on {@code processIds})
 * @param processIds the members' process ids, sorted, at most {@link #MAX_PROCESS_IDS}
 * @param planId the plan honored, or null
 * @param fallbackReason {@code "<code>: <detail>"} when Kafka's sticky assignment was given instead, else null
 * @param followupNeeded true while the plan's target is not reached: a later assignment must follow
 * @param warmups warm-up standbys placed to move tasks
 * @param rejectedRecord why the newest plans record for the group was refused while an older plan is kept, or null
 */
public record Decision(String groupId, List<String> processIds, long decidedAt, String planId,
        String fallbackReason, boolean followupNeeded, int warmups, int members, String rejectedRecord) {
    public static final int MAX_PROCESS_IDS = 1000;
    static final int SCHEMA_VERSION = 1;

    /** The compacted topic's key: one latest decision per group (or per first process id when unnamed). */
    public String key() {
        if (groupId != null) {
            return groupId;
        }
        return "process:" + (processIds.isEmpty() ? "" : processIds.get(0));
    }

    /** The reason code alone ({@code no_plan}, {@code expired}, ...), or null when a plan was honored. */
    public String reasonCode() {
        if (fallbackReason == null) {
            return null;
        }
        int colon = fallbackReason.indexOf(':');
        return colon < 0 ? fallbackReason : fallbackReason.substring(0, colon);
    }

    public byte[] json(String assignor) {
        Map<String, Object> fields = new LinkedHashMap<>();
        fields.put("schema_version", SCHEMA_VERSION);
        fields.put("assignor", assignor);
        fields.put("group_id", groupId);
        fields.put("process_ids", processIds);
        fields.put("members", members);
        fields.put("decided_at", decidedAt);
        fields.put("outcome", planId != null ? "plan" : "sticky");
        fields.put("plan_id", planId);
        fields.put("fallback_reason", fallbackReason);
        fields.put("followup_needed", followupNeeded);
        fields.put("warmups", warmups);
        fields.put("rejected_record", rejectedRecord);
        return CanonicalJson.bytes(fields);
    }
}
