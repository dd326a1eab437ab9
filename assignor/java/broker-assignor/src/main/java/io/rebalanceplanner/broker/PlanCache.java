package io.rebalanceplanner.broker;

import io.rebalanceplanner.core.KeyRevocation;
import io.rebalanceplanner.core.Plan;
import io.rebalanceplanner.core.PlanLedger;
import io.rebalanceplanner.core.PlanVerifier;
import io.rebalanceplanner.core.Verdict;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.atomic.AtomicLong;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The verified plans of every group, built from plans-topic records by one writer (the background reader) and
 * read by any number of coordinator threads through an immutable {@link Snapshot}.
 *
 * <p>Each group's records are folded by the core's {@link PlanLedger} (the rule every leader shares): verified
 * against its key (the group id) with the highest verified {@code sequence} of that group as the replay floor. A
 * verified plan replaces the group's plan (an expired one too: it raises the floor, and assignors check expiry), a
 * verified withdrawal removes it, and anything rejected leaves the verified state as it was: a garbage or
 * unverifiable newest record never undoes a verified plan. A record dated in the future is retried on later
 * refreshes (as the classic plugin would see it again at a later rebalance), a bounded number of them.
 */
public final class PlanCache {
    private static final Logger LOG = LoggerFactory.getLogger(PlanCache.class);
    /** Kafka's own limit on a group id; a longer key names no group. */
    static final int MAX_KEY_CHARS = 249;
    static final int MAX_DEFERRED = 64;

    /**
     * One group's verified state: its folded records ({@link PlanLedger#choice} is what to honor and what to report,
     * the classic plugin's rule), and what they say, derived.
     */
    public record Entry(String groupId, PlanLedger ledger) {
        /** The newest verified plan, or null after a verified withdrawal or a revocation of its key. */
        public Plan plan() {
            Verdict v = ledger.verified();
            return v != null && v.outcome() == Verdict.Outcome.PLAN ? v.plan() : null;
        }

        /** The highest verified {@code sequence} (plan or withdrawal): lower ones are replays. */
        public long highestSequence() {
            return ledger.highestSequence(); // an entry exists once a record of the group verified
        }

        /** Why the newest record was refused, else why the verified one is not a plan ({@code "<code>: <detail>"}). */
        public String lastRejection() {
            Verdict v = ledger.rejection() != null ? ledger.rejection() : ledger.verified();
            return v == null ? null : v.fallbackReason();
        }
    }

    /** What assignors read: immutable, swapped whole. */
    public static final class Snapshot {
        static final Snapshot NOT_LOADED = new Snapshot(Map.of(), Map.of(), Map.of(), false, "not read yet");

        private final Map<String, Entry> byGroup;
        private final Map<String, List<String>> groupsByProcess;
        private final Map<String, List<String>> withdrawnByProcess;
        private final boolean loaded;
        private final String readError;

        Snapshot(Map<String, Entry> byGroup, Map<String, List<String>> groupsByProcess,
                Map<String, List<String>> withdrawnByProcess, boolean loaded, String readError) {
            this.byGroup = byGroup;
            this.groupsByProcess = groupsByProcess;
            this.withdrawnByProcess = withdrawnByProcess;
            this.loaded = loaded;
            this.readError = readError;
        }

        public Entry entry(String groupId) {
            return byGroup.get(groupId);
        }

        /** The groups whose plan's target names this process id (normally zero or one). */
        public List<String> groupsOf(String processId) {
            return groupsByProcess.getOrDefault(processId, List.of());
        }

        /**
         * The groups without a plan now whose last verified plan's target named this process id (it was withdrawn):
         * still matched, so that a replay after the withdrawal is reported as one, not as "no plan".
         */
        public List<String> withdrawnGroupsOf(String processId) {
            return withdrawnByProcess.getOrDefault(processId, List.of());
        }

        /** Whether the plans topic has been read to its end once: before that, "no plan" means "not known yet". */
        public boolean loaded() {
            return loaded;
        }

        /** The reader's last error while not loaded, or null. */
        public String readError() {
            return readError;
        }

        public int size() {
            return byGroup.size();
        }
    }

    private PlanVerifier verifier; // gains revoked key ids (writer thread only)
    private final int maxGroups;
    private final Map<String, Entry> entries = new HashMap<>();
    private final Map<String, PlanLedger> ledgers = new HashMap<>();
    private final Map<String, byte[]> deferred = new LinkedHashMap<>();
    /** Per group, the process ids of its newest verified plan's target (kept after a withdrawal of that plan). */
    private final Map<String, List<String>> lastTargets = new HashMap<>();
    private final AtomicLong verified = new AtomicLong();
    private final AtomicLong rejected = new AtomicLong();
    private final AtomicLong refused = new AtomicLong();
    private boolean changed = true;
    private volatile Snapshot snapshot = Snapshot.NOT_LOADED;

    public PlanCache(PlanVerifier verifier, int maxGroups) {
        this.verifier = verifier;
        this.maxGroups = maxGroups;
    }

    /** Take one plans-topic record (writer thread only). Returns the verdict, or null when it was not verified. */
    public synchronized Verdict offer(byte[] key, byte[] value, long nowMs) {
        if (key == null || value == null) {
            return null; // An unsigned tombstone withdraws nothing (docs/formats.md).
        }
        if (KeyRevocation.isRevocationKey(key)) {
            revoke(value);
            return null;
        }
        String groupId = new String(key, java.nio.charset.StandardCharsets.UTF_8);
        if (groupId.isEmpty() || groupId.length() > MAX_KEY_CHARS) {
            rejected.incrementAndGet();
            LOG.warn("plans record refused: its key of {} chars names no group", groupId.length());
            return null;
        }
        PlanLedger current = ledgers.get(groupId);
        if (current == null && ledgers.size() >= maxGroups) {
            refused.incrementAndGet();
            LOG.warn("plans record for group {} refused: the cache holds its maximum of {} groups", groupId,
                    maxGroups);
            return null;
        }
        PlanLedger before = current == null ? new PlanLedger(groupId) : current;
        // The verifier bounds the value (1 MiB, 32 levels) before parsing it.
        PlanLedger after = before.offer(value, verifier, nowMs);
        if (after.verified() != before.verified()) {
            verified.incrementAndGet();
            if (after.verified().outcome() == Verdict.Outcome.PLAN) {
                lastTargets.put(groupId, List.copyOf(after.verified().plan().target().keySet()));
            }
            ledgers.put(groupId, after);
            entries.put(groupId, entryOf(after));
            deferred.remove(groupId);
            changed = true;
            return PlanVerifier.usable(after.verified(), nowMs);
        }
        Verdict verdict = after.rejection();
        rejected.incrementAndGet();
        LOG.warn("plans record for group {} rejected: {}", groupId, verdict.fallbackReason());
        if ("future".equals(verdict.reasonCode())
                && (deferred.containsKey(groupId) || deferred.size() < MAX_DEFERRED)) {
            deferred.put(groupId, value);
        }
        if (current != null) {
            ledgers.put(groupId, after);
            entries.put(groupId, entryOf(after));
            changed = true;
        }
        return verdict;
    }

    /**
     * A key-revocation record (KeyRevocation): once it verifies, no record of the revoked key verifies and every
     * plan that key signed is dropped (its group falls back until a newer record verifies).
     */
    private void revoke(byte[] value) {
        KeyRevocation.Result result = KeyRevocation.read(value, verifier.keys());
        if (result.revokedKeyId() == null) {
            rejected.incrementAndGet();
            LOG.warn("key revocation refused: {}: {}", result.reasonCode(), result.detail());
            return;
        }
        if (verifier.revoked().contains(result.revokedKeyId())) {
            return;
        }
        LOG.warn("plan-signing key {} revoked: its plans are no longer honored", result.revokedKeyId());
        verifier = verifier.revoking(Set.of(result.revokedKeyId()));
        for (Map.Entry<String, PlanLedger> e : ledgers.entrySet()) {
            PlanLedger after = e.getValue().revoke(verifier.revoked());
            if (after != e.getValue()) {
                e.setValue(after);
                entries.put(e.getKey(), entryOf(after));
                changed = true;
            }
        }
    }

    /** The key ids revoked so far. */
    public synchronized Set<String> revoked() {
        return verifier.revoked();
    }

    private static Entry entryOf(PlanLedger ledger) {
        return new Entry(ledger.groupId(), ledger);
    }

    /** Verify again the records that were dated in the future (writer thread only). */
    public synchronized void retryDeferred(long nowMs) {
        if (deferred.isEmpty()) {
            return;
        }
        Map<String, byte[]> again = new LinkedHashMap<>(deferred);
        deferred.clear();
        again.forEach((group, value) -> offer(group.getBytes(java.nio.charset.StandardCharsets.UTF_8), value, nowMs));
    }

    /** Make what was offered so far visible to assignors. */
    public synchronized void publish(boolean loaded, String readError) {
        Snapshot old = snapshot;
        if (!changed && old.loaded() == loaded && java.util.Objects.equals(old.readError(), readError)) {
            return;
        }
        Map<String, List<String>> byProcess = new HashMap<>();
        Map<String, List<String>> withdrawnByProcess = new HashMap<>();
        for (Entry e : entries.values()) {
            if (e.plan() != null) {
                for (String pid : e.plan().target().keySet()) {
                    byProcess.computeIfAbsent(pid, k -> new ArrayList<>(1)).add(e.groupId());
                }
            } else {
                for (String pid : lastTargets.getOrDefault(e.groupId(), List.of())) {
                    withdrawnByProcess.computeIfAbsent(pid, k -> new ArrayList<>(1)).add(e.groupId());
                }
            }
        }
        byProcess.replaceAll((pid, groups) -> List.copyOf(groups));
        withdrawnByProcess.replaceAll((pid, groups) -> List.copyOf(groups));
        snapshot = new Snapshot(Map.copyOf(entries), Map.copyOf(byProcess), Map.copyOf(withdrawnByProcess), loaded,
                loaded ? null : readError);
        changed = false;
    }

    public Snapshot snapshot() {
        return snapshot;
    }

    /** Records that verified (plans and withdrawals). */
    public long verifiedRecords() {
        return verified.get();
    }

    /** Records that did not verify or were out of bounds. */
    public long rejectedRecords() {
        return rejected.get();
    }

    /** Records refused because the cache was full. */
    public long refusedRecords() {
        return refused.get();
    }
}
