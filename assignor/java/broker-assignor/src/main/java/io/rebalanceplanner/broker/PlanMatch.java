package io.rebalanceplanner.broker;

import io.rebalanceplanner.core.CodePoints;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;

/**
 * Which cached plan belongs to a streams group, which KIP-1357 hands the assignor without its group id.
 *
 * <p>If any member carries the group tag (a client tag, {@code client.tag.rebalance.planner.group=<group id>} in
 * the application's config), its value is the group id; members that disagree make the match ambiguous. Otherwise
 * the group is the one whose plan's target names any of the members' process ids (Kafka Streams process ids are
 * random UUIDs kept in the state directory, so two groups share one only by mistake); two such plans are ambiguous.
 * A group matched this way is then checked in full by the fit check (every member known to the target, ...). A group
 * whose plan was withdrawn stays matched by the process ids of that plan while no live plan names the members, so
 * that what its ledger says (withdrawn, or a replay refused after it) is reported rather than "no plan".
 *
 * @param groupId the matched group, or null
 * @param code null when a plan was found; otherwise {@code no_plan} or {@code ambiguous_plan}
 */
record PlanMatch(String groupId, PlanCache.Entry entry, String code, String detail) {
    static PlanMatch find(PlanCache.Snapshot plans, GroupView view) {
        if (!view.tagValues.isEmpty()) {
            if (view.tagValues.size() > 1) {
                return new PlanMatch(null, null, "ambiguous_plan", "members name different groups in their tag: "
                        + show(view.tagValues));
            }
            String groupId = view.tagValues.iterator().next();
            PlanCache.Entry entry = plans.entry(groupId);
            if (entry == null) {
                return new PlanMatch(groupId, null, "no_plan", "no verified plan for group " + groupId);
            }
            return new PlanMatch(groupId, entry, null, null); // the ledger's choice says withdrawn, expired, ...
        }
        Set<String> groups = new TreeSet<>(CodePoints.ORDER);
        for (String pid : view.processIds) {
            groups.addAll(plans.groupsOf(pid));
        }
        if (groups.isEmpty()) {
            for (String pid : view.processIds) {
                groups.addAll(plans.withdrawnGroupsOf(pid));
            }
        }
        if (groups.isEmpty()) {
            return new PlanMatch(null, null, "no_plan", "no verified plan names any of the "
                    + view.processIds.size() + " process ids");
        }
        if (groups.size() > 1) {
            return new PlanMatch(null, null, "ambiguous_plan", "plans of several groups name these members: "
                    + show(groups));
        }
        String groupId = groups.iterator().next();
        return new PlanMatch(groupId, plans.entry(groupId), null, null);
    }

    boolean found() {
        return code == null;
    }

    private static String show(Set<String> items) {
        List<String> shown = new ArrayList<>();
        for (String s : items) {
            if (shown.size() == 5) {
                shown.add("...");
                break;
            }
            shown.add(s);
        }
        return String.join(", ", shown);
    }
}
