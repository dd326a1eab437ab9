package io.rebalanceplanner.reference;

import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

/**
 * Which of the product's parts a member runs, and the {@code rebalance.planner.*} properties they read from the
 * Streams config: the plugin (classic protocol only: under the streams protocol the broker assigns) and the
 * restored-offsets listener (with the plugin or under the streams protocol by default, {@code --restored-reports}).
 */
record PlannerParts(boolean plugin, boolean restoredReports) {
    static final String PLUGIN = "io.rebalanceplanner.PlanHonoringTaskAssignor";

    static PlannerParts from(Flags flags, GroupProtocol protocol) {
        boolean plugin = flags.getBool("plugin", true) && protocol == GroupProtocol.CLASSIC;
        // The leader's state reports cannot say what other members restored, and a streams-protocol group sends
        // no reports at all: each member's own listener is the only way observe learns what a plan restored.
        return new PlannerParts(plugin, flags.getBool("restored-reports", plugin || protocol == GroupProtocol.STREAMS));
    }

    /** The compacted topics the member may have to create: the plans topic (plugin) and the reports topic. */
    List<String> compactedTopics(Flags flags) {
        List<String> out = new ArrayList<>();
        if (plugin) {
            out.add(flags.get("plans-topic", "_rebalance_plans"));
        }
        if (plugin || restoredReports) {
            out.add(flags.get("reports-topic", "_rebalance_reports"));
        }
        return out;
    }

    /**
     * The Streams properties of these parts; Kafka Streams ignores the rebalance.planner.* keys it does not know.
     * The plugin keeps its replay floor beside the member's Streams state ({@code stateDir}), outside the
     * application's own folder there, which Kafka Streams manages: a restarted member refuses a replayed plan even
     * after the record that raised the floor has left the plans topic.
     */
    Map<String, Object> properties(Flags flags, String stateDir) {
        Map<String, Object> props = new TreeMap<>();
        if (plugin || restoredReports) {
            props.put("rebalance.planner.reports.topic", flags.get("reports-topic", "_rebalance_reports"));
        }
        if (plugin) {
            props.put("task.assignor.class", PLUGIN);
            props.put("rebalance.planner.verify.keys", flags.get("verify-keys", ""));
            props.put("rebalance.planner.plans.topic", flags.get("plans-topic", "_rebalance_plans"));
            props.put("rebalance.planner.state.dir", Paths.get(stateDir, "rebalance-planner").toString());
            if (flags.has("plan-check-interval-ms")) {
                props.put("rebalance.planner.plan.check.interval.ms", flags.get("plan-check-interval-ms", ""));
            }
            props.put("rebalance.planner.scheduled.rebalance.max.delay.ms",
                    flags.get("scheduled-rebalance-max-delay-ms", "0"));
            props.put("rebalance.planner.hold.without.caught.up.copy",
                    flags.get("hold-without-caught-up-copy", "false"));
        }
        return props;
    }
}
