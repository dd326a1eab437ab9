package io.rebalanceplanner;

import io.rebalanceplanner.core.FitCheck;
import io.rebalanceplanner.core.Honor;
import io.rebalanceplanner.core.KeyRevocation;
import io.rebalanceplanner.core.LiveAssignment;
import io.rebalanceplanner.core.Plan;
import io.rebalanceplanner.core.PlanConfigs;
import io.rebalanceplanner.core.PlanLedger;
import io.rebalanceplanner.core.PlanVerifier;
import io.rebalanceplanner.kafka.PlanSource;
import io.rebalanceplanner.kafka.PlannerSettings;
import io.rebalanceplanner.kafka.PlansUnreadableException;
import io.rebalanceplanner.kafka.RevokedKeysFile;
import io.rebalanceplanner.kafka.SequenceFloor;
import io.rebalanceplanner.kafka.SharedClients;
import java.time.Instant;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import org.apache.kafka.streams.processor.assignment.AssignmentConfigs;
import org.apache.kafka.streams.processor.assignment.TaskAssignor;
import org.apache.kafka.streams.processor.assignment.TaskAssignor.TaskAssignment;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/** Reads the group's signed plans and honors the chosen one if it fits the group, or says why not. */
final class Honoring {
    private static final Logger LOG = LoggerFactory.getLogger(Honoring.class);

    /** What the plans decided: an honored assignment with its plan id, or none; {@code reason} for the reports. */
    record Outcome(Decided honored, String planId, String reason) {
        static Outcome notHonored(String reason) {
            return new Outcome(null, null, reason);
        }
    }

    private final PlannerSettings settings;
    private PlanVerifier verifier; // narrowed as revocations are learned; one assign at a time per assignor
    private final PlanSource planSource;

    Honoring(PlannerSettings settings, PlanVerifier verifier, PlanSource planSource) {
        this.settings = settings;
        this.verifier = verifier;
        this.planSource = planSource;
    }

    /** "num_standby_replicas 1 -> 0, ..." where the plan's settings differ from the application's own; "" if none. */
    static String settingsChanges(PlanConfigs plan, AssignmentConfigs own) {
        List<String> out = new ArrayList<>();
        long[][] pairs = {
            {own.acceptableRecoveryLag(), plan.acceptableRecoveryLag()},
            {own.maxWarmupReplicas(), plan.maxWarmupReplicas()},
            {own.numStandbyReplicas(), plan.numStandbyReplicas()},
            {own.probingRebalanceIntervalMs(), plan.probingRebalanceIntervalMs()},
        };
        for (int i = 0; i < pairs.length; i++) {
            if (pairs[i][0] != pairs[i][1]) {
                out.add(PlanConfigs.NAMES.get(i) + " " + pairs[i][0] + " -> " + pairs[i][1]);
            }
        }
        return String.join(", ", out);
    }

    /** The plans' decision for this rebalance; throws only on internal errors, which the caller reports. */
    Outcome decide(GroupView view, long now) {
        String groupId = settings.applicationId();
        // The group's records since the last read, folded into what this JVM knows of them (the order rule by
        // sequence, PlanLedger): a replayed or unverifiable newest record never undoes a verified plan.
        PlanLedger ledger = SharedClients.planLedger(groupId);
        SequenceFloor floor = SequenceFloor.of(settings);
        String unreadable = null;
        RevokedKeysFile revokedFile = RevokedKeysFile.of(settings);
        try {
            ledger = ledger.remember(floor.read());
            List<byte[]> fresh = planSource.records(groupId, settings.planReadTimeoutMs());
            // Revocations first: a plan signed by a revoked key is dropped, and no record of that key verifies.
            Set<String> kept = revokedFile == null ? Set.of() : revokedFile.read();
            Set<String> revoked = new HashSet<>(kept);
            revoked.addAll(KeyRevocation.revokedKeyIds(planSource.revocations(), verifier.keys()));
            if (!revoked.equals(verifier.revoked())) {
                LOG.warn("plan-signing key(s) {} revoked for {}", revoked, groupId);
                verifier = verifier.revoking(revoked);
            }
            ledger = ledger.revoke(revoked);
            if (revokedFile != null) {
                revokedFile.keep(kept, revoked);
            }
            for (byte[] value : fresh) {
                ledger = ledger.offer(value, verifier, now);
            }
        } catch (PlansUnreadableException e) {
            // Not "no plan": the last verified plan stays honored while valid, else Kafka's own assignment.
            unreadable = "plans_unreadable: " + e.getMessage();
        }
        ledger = ledger.recheck(verifier, now);
        SharedClients.planLedger(groupId, ledger);
        floor.keep(ledger.highestSequence());
        if (ledger.isEmpty() && unreadable == null) {
            LOG.info("no plan for {} on the plans topic: Kafka's own (KIP-441) assignment", groupId);
            return Outcome.notHonored(null);
        }
        PlanLedger.Choice choice = ledger.choice(now);
        String reported = unreadable != null ? unreadable : choice.reason();
        if (choice.plan() == null) {
            return Outcome.notHonored(reported);
        }
        Plan plan = choice.plan();
        FitCheck.Unfit unfit = FitCheck.unfitReason(plan.target(), view.group, plan.configs());
        if (unfit != null) {
            // A kept plan that does not fit: the refused newest record (what was last published) is the news.
            return Outcome.notHonored(reported != null ? reported
                    : unfit.code() + ": plan " + plan.planId() + ": " + unfit.detail());
        }
        LiveAssignment honored = Honor.honorTarget(FitCheck.targetFor(plan.target(), view.group), view.group,
                plan.configs(), plan.moveOrder(), view.lagIndex(plan.configs().acceptableRecoveryLag()));
        Instant next = Followups.at(now, honored.followupRebalance(), plan.configs().probingRebalanceIntervalMs(),
                settings);
        TaskAssignment assignment = view.toKafka(honored.assignment(), next);
        TaskAssignor.AssignmentError error = view.validate(assignment);
        if (error != TaskAssignor.AssignmentError.NONE) {
            throw new IllegalStateException("honoring plan " + plan.planId() + " gave an invalid assignment: "
                    + error);
        }
        String planId = plan.planId();
        LOG.info("honoring plan {} (next rebalance: {})", planId, Followups.describe(honored.followupRebalance(),
                next));
        String changed = settingsChanges(plan.configs(), view.own);
        if (!changed.isEmpty()) {
            // The rule (docs/group-settings.md): a verified plan is honored with the settings a person approved,
            // which the pipeline flagged as an explicit override; the application's own return with the fallback.
            LOG.warn("plan {} is honored with its approved settings, not the application's own: {}", planId,
                    changed);
        }
        if (reported != null) {
            LOG.warn("honoring plan {}, the last verified one: {}", planId, reported);
        }
        return new Outcome(new Decided(assignment, honored.assignment()), planId, reported);
    }
}
