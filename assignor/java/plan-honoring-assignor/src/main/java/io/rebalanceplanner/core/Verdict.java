package io.rebalanceplanner.core;

/** What verifying one plan record gave: a plan to honor, a withdrawal, or a rejection with its reason. */
public final class Verdict {
    public enum Outcome { PLAN, WITHDRAWN, REJECTED }

    private final Outcome outcome;
    private final String reasonCode;
    private final String detail;
    private final String planId;
    private final long sequence;
    private final Plan plan;
    private final String keyId;

    private Verdict(Outcome outcome, String reasonCode, String detail, String planId, long sequence, Plan plan,
            String keyId) {
        this.outcome = outcome;
        this.reasonCode = reasonCode;
        this.detail = detail;
        this.planId = planId;
        this.sequence = sequence;
        this.plan = plan;
        this.keyId = keyId;
    }

    static Verdict plan(Plan plan, String keyId) {
        return new Verdict(Outcome.PLAN, null, null, plan.planId(), plan.sequence(), plan, keyId);
    }

    static Verdict withdrawn(String planId, long sequence, String keyId) {
        return new Verdict(Outcome.WITHDRAWN, "withdrawn", "plan " + planId + " was withdrawn", planId, sequence,
                null, keyId);
    }

    static Verdict rejected(String reasonCode, String detail, String planId) {
        return new Verdict(Outcome.REJECTED, reasonCode, detail, planId, Long.MIN_VALUE, null, null);
    }

    public Outcome outcome() {
        return outcome;
    }

    /** Null for a plan; a reason code of schemas/vectors/README.md otherwise. */
    public String reasonCode() {
        return reasonCode;
    }

    /** What the reason code says of this record, or null for a plan. */
    public String detail() {
        return detail;
    }

    /** The state report's {@code fallback_reason}: {@code "<code>: <detail>"}, or null for a plan. */
    public String fallbackReason() {
        return reasonCode == null ? null : reasonCode + ": " + detail;
    }

    /** The record's plan id when it was readable, else null. */
    public String planId() {
        return planId;
    }

    /** The verified record's sequence (plan or withdrawal); {@code Long.MIN_VALUE} for a rejection. */
    public long sequence() {
        return sequence;
    }

    public Plan plan() {
        return plan;
    }

    /** The key id that signed a verified record (plan or withdrawal), which a key revocation drops; null else. */
    public String keyId() {
        return keyId;
    }

    @Override
    public String toString() {
        return outcome + (reasonCode == null ? "" : " " + fallbackReason());
    }
}
