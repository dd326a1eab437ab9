package io.rebalanceplanner.core;

/**
 * One group's plan records folded in topic order: the order rule by sequence (schemas/vectors/README.md, "Plan
 * ledger"; Python's {@code assignor.protocol.plan_ledger} is the same).
 *
 * <p>Each record is checked against the highest verified sequence known so far. A verified plan or withdrawal
 * becomes the group's verified record and raises that floor; a record that does not verify changes nothing
 * verified and is only remembered as the newest refused one, with its reason. So a garbage, forged or replayed
 * newest record never undoes a verified plan. Immutable: every step returns a new ledger.
 */
public final class PlanLedger {
    /**
     * What the leader does now: honor {@code plan} (or none) and report {@code reason}.
     *
     * @param plan the verified, unexpired plan to honor, or null
     * @param why with a plan, why the newest record is not it; without, why none is honored; null when nothing
     *     needs saying
     * @param sequence the highest verified sequence known, or null
     */
    public record Choice(Plan plan, Verdict why, Long sequence) {
        /** {@code "<code>: <detail>"}, or null. */
        public String reason() {
            return why == null ? null : why.fallbackReason();
        }

        public String reasonCode() {
            return why == null ? null : why.reasonCode();
        }

        public String detail() {
            return why == null ? null : why.detail();
        }
    }

    private final String groupId;
    private final Long highestSequence;
    private final Verdict verified;
    private final byte[] refused;
    private final Verdict rejection;

    public PlanLedger(String groupId) {
        this(groupId, null, null, null, null);
    }

    private PlanLedger(String groupId, Long highestSequence, Verdict verified, byte[] refused, Verdict rejection) {
        this.groupId = groupId;
        this.highestSequence = highestSequence;
        this.verified = verified;
        this.refused = refused;
        this.rejection = rejection;
    }

    /**
     * Drop the verified record if a revoked key signed it: nothing is honored until a newer record verifies (the
     * floor stays, so the plans it replaced do not come back). Offer later records with a verifier that refuses
     * {@code keyIds} ({@link PlanVerifier#revoking}).
     */
    public PlanLedger revoke(java.util.Set<String> keyIds) {
        if (verified == null || !keyIds.contains(verified.keyId())) {
            return this;
        }
        Verdict why = Verdict.rejected("revoked_key", "key_id '" + verified.keyId()
                + "' was revoked by a signed key revocation", verified.planId());
        return new PlanLedger(groupId, highestSequence, null, null, why);
    }

    /** Raise the floor to a sequence already acted on (kept across restarts); null changes nothing. */
    public PlanLedger remember(Long sequence) {
        if (sequence == null || (highestSequence != null && sequence <= highestSequence)) {
            return this;
        }
        return new PlanLedger(groupId, sequence, verified, refused, rejection);
    }

    /** Fold the group's next record (topic order). A tombstone (null) is unsigned: it withdraws nothing. */
    public PlanLedger offer(byte[] value, PlanVerifier verifier, long nowMs) {
        if (value == null) {
            return this;
        }
        Verdict verdict = verifier.check(value, groupId, nowMs, highestSequence);
        if (verdict.outcome() == Verdict.Outcome.REJECTED) {
            return new PlanLedger(groupId, highestSequence, verified, value, verdict);
        }
        return new PlanLedger(groupId, verdict.sequence(), verdict, null, null);
    }

    /** Check the refused newest record again if it was only dated in the future (time may have caught up). */
    public PlanLedger recheck(PlanVerifier verifier, long nowMs) {
        if (refused == null || rejection == null || !"future".equals(rejection.reasonCode())) {
            return this;
        }
        return offer(refused, verifier, nowMs);
    }

    /**
     * The verified plan while it is valid, whatever the refused newest record was; else none, with the reason
     * (the refused record's first: it is what the group's operators last published).
     */
    public Choice choice(long nowMs) {
        if (verified == null) {
            return new Choice(null, rejection, highestSequence);
        }
        Verdict usable = PlanVerifier.usable(verified, nowMs);
        if (usable.outcome() != Verdict.Outcome.PLAN) {
            return new Choice(null, rejection != null ? rejection : usable, highestSequence);
        }
        return new Choice(usable.plan(), rejection, highestSequence);
    }

    /** Whether any record of the group was offered and kept (verified or refused): false means "no plan". */
    public boolean isEmpty() {
        return verified == null && rejection == null;
    }

    public String groupId() {
        return groupId;
    }

    public Long highestSequence() {
        return highestSequence;
    }

    /** The newest verified record's verdict (plan or withdrawal), or null. */
    public Verdict verified() {
        return verified;
    }

    /** Why the newest record did not verify (it came after the verified one), or null. */
    public Verdict rejection() {
        return rejection;
    }
}
