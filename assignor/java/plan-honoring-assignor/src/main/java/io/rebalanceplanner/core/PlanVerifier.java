package io.rebalanceplanner.core;

import java.security.GeneralSecurityException;
import java.security.KeyFactory;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.security.PublicKey;
import java.security.Signature;
import java.security.spec.X509EncodedKeySpec;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;

/**
 * Checks a plan record in the order schemas/vectors/README.md fixes; the first failing step names the reason.
 *
 * <p>Pure: the caller supplies the clock and the newest {@code created_at} it has honored, so the same
 * verifier runs against the shared vectors and inside the assignor.
 */
public final class PlanVerifier {
    /** DER prefix that turns a raw 32-byte Ed25519 key into an X.509 SubjectPublicKeyInfo (RFC 8410). */
    private static final byte[] X509_ED25519_PREFIX = hex("302a300506032b6570032100");

    private static final Map<String, Class<?>> PLAN_FIELDS = new LinkedHashMap<>();
    private static final Map<String, Class<?>> WITHDRAWAL_FIELDS = new LinkedHashMap<>();

    static {
        PLAN_FIELDS.put("schema_version", Long.class);
        PLAN_FIELDS.put("plan_id", String.class);
        PLAN_FIELDS.put("group_id", String.class);
        PLAN_FIELDS.put("snapshot_id", String.class);
        PLAN_FIELDS.put("created_at", Long.class);
        PLAN_FIELDS.put("valid_until", Long.class);
        PLAN_FIELDS.put("approved_by", String.class);
        PLAN_FIELDS.put("approved_at", Long.class);
        PLAN_FIELDS.put("configs", Map.class);
        PLAN_FIELDS.put("target", Map.class);
        PLAN_FIELDS.put("move_order", List.class);
        PLAN_FIELDS.put("target_digest", String.class);
        PLAN_FIELDS.put("plan_digest", String.class);
        PLAN_FIELDS.put("sequence", Long.class);
        PLAN_FIELDS.put("key_id", String.class);
        PLAN_FIELDS.put("signature", String.class);
        WITHDRAWAL_FIELDS.put("schema_version", Long.class);
        WITHDRAWAL_FIELDS.put("plan_id", String.class);
        WITHDRAWAL_FIELDS.put("group_id", String.class);
        WITHDRAWAL_FIELDS.put("created_at", Long.class);
        WITHDRAWAL_FIELDS.put("sequence", Long.class);
        WITHDRAWAL_FIELDS.put("withdrawn", Boolean.class);
        WITHDRAWAL_FIELDS.put("key_id", String.class);
        WITHDRAWAL_FIELDS.put("signature", String.class);
    }

    private static final Set<String> NON_EMPTY = Set.of("plan_id", "group_id", "key_id", "signature");
    private static final Set<String> TIMES = Set.of("created_at", "valid_until", "approved_at");
    /** The record version this verifier reads: 2 signs plan_digest and sequence. */
    public static final long SCHEMA_VERSION = 2;
    /** A sequence every JSON reader holds exactly: 1..2^53-1. */
    public static final long MAX_SEQUENCE = (1L << 53) - 1;
    /** The fields plan_digest covers, as the record carries them (Python: plans.BODY_FIELDS). */
    private static final List<String> BODY_FIELDS = List.of("plan_id", "group_id", "snapshot_id", "created_at",
            "valid_until", "configs", "target", "move_order");


    private final Map<String, PublicKey> keys;
    private final long clockSkewMs;
    /** Key ids a verified key revocation took back (KeyRevocation): their records are refused. */
    private final Set<String> revoked;

    public PlanVerifier(Map<String, PublicKey> keys, long clockSkewMs) {
        this(keys, clockSkewMs, Set.of());
    }

    private PlanVerifier(Map<String, PublicKey> keys, long clockSkewMs, Set<String> revoked) {
        this.keys = Map.copyOf(keys);
        this.clockSkewMs = clockSkewMs;
        this.revoked = Set.copyOf(revoked);
    }

    /** This verifier refusing {@code keyIds} too (revocations are never undone). */
    public PlanVerifier revoking(Set<String> keyIds) {
        if (revoked.containsAll(keyIds)) {
            return this;
        }
        Set<String> all = new HashSet<>(revoked);
        all.addAll(keyIds);
        return new PlanVerifier(keys, clockSkewMs, all);
    }

    public Set<String> revoked() {
        return revoked;
    }

    /** The verify keys by key id. */
    public Map<String, PublicKey> keys() {
        return keys;
    }

    /** {@code key_id=<64 hex>[,key_id=<64 hex>...]}, the format of {@code rebalance.planner.verify.keys}. */
    public static Map<String, PublicKey> parseKeys(String spec) {
        Map<String, PublicKey> keys = new TreeMap<>();
        if (spec == null || spec.isBlank()) {
            return keys;
        }
        for (String entry : spec.split(",")) {
            String item = entry.strip();
            if (item.isEmpty()) {
                continue;
            }
            int eq = item.indexOf('=');
            if (eq <= 0) {
                throw new IllegalArgumentException("verify key entry must be key_id=<64 hex>, got '" + item + "'");
            }
            keys.put(item.substring(0, eq).strip(), ed25519PublicKey(item.substring(eq + 1).strip()));
        }
        return keys;
    }

    public static PublicKey ed25519PublicKey(String rawHex) {
        if (!rawHex.matches("[0-9a-fA-F]{64}")) {
            throw new IllegalArgumentException("an Ed25519 public key is 64 hex characters, got " + rawHex.length());
        }
        byte[] raw = hex(rawHex.toLowerCase(java.util.Locale.ROOT));
        byte[] der = new byte[X509_ED25519_PREFIX.length + raw.length];
        System.arraycopy(X509_ED25519_PREFIX, 0, der, 0, X509_ED25519_PREFIX.length);
        System.arraycopy(raw, 0, der, X509_ED25519_PREFIX.length, raw.length);
        try {
            return KeyFactory.getInstance("Ed25519").generatePublic(new X509EncodedKeySpec(der));
        } catch (GeneralSecurityException e) {
            throw new IllegalArgumentException("not an Ed25519 public key: " + e.getMessage(), e);
        }
    }

    /**
     * Steps 1-11: a plan to honor, a withdrawal, or the rejection.
     *
     * @param highestSequence the highest verified sequence known for the group, or null for none
     */
    public Verdict verify(byte[] value, String groupId, long nowMs, Long highestSequence) {
        return usable(check(value, groupId, nowMs, highestSequence), nowMs);
    }

    /** Steps 10-11 on a checked verdict: an expired plan is rejected; anything else is returned as it is. */
    public static Verdict usable(Verdict checked, long nowMs) {
        if (checked.outcome() == Verdict.Outcome.PLAN && nowMs > checked.plan().validUntil()) {
            return Verdict.rejected("expired", "plan " + checked.planId() + " expired at "
                    + checked.plan().validUntil() + " (now " + nowMs + ")", checked.planId());
        }
        return checked;
    }

    /**
     * Steps 1-9: a verified plan (possibly expired) or withdrawal of this group, or the rejection.
     *
     * @param highestSequence the highest verified sequence known for the group, or null for none
     */
    public Verdict check(byte[] value, String groupId, long nowMs, Long highestSequence) {
        Map<String, Object> record;
        try {
            Object parsed = StrictJson.parse(value);
            if (!(parsed instanceof Map)) {
                return Verdict.rejected("malformed", "the record is not a JSON object", null);
            }
            @SuppressWarnings("unchecked")
            Map<String, Object> object = (Map<String, Object>) parsed;
            record = object;
        } catch (JsonException e) {
            return Verdict.rejected("malformed", e.getMessage(), null);
        }
        String planId = record.get("plan_id") instanceof String ? (String) record.get("plan_id") : null;
        Object withdrawn = record.get("withdrawn");
        if (record.containsKey("withdrawn") && !(withdrawn instanceof Boolean)) {
            return Verdict.rejected("malformed", "withdrawn must be a boolean", planId);
        }
        boolean withdrawal = Boolean.TRUE.equals(withdrawn);
        // The version before the fields: an older record lacks fields this version requires.
        if (!(record.get("schema_version") instanceof Long)) {
            return Verdict.rejected("malformed", "field schema_version is missing or not an integer", planId);
        }
        long schemaVersion = (Long) record.get("schema_version");
        if (schemaVersion != SCHEMA_VERSION) {
            return Verdict.rejected("unsupported_version", "schema_version " + schemaVersion + " (supported: "
                    + SCHEMA_VERSION + ")", planId);
        }
        for (Map.Entry<String, Class<?>> field : (withdrawal ? WITHDRAWAL_FIELDS : PLAN_FIELDS).entrySet()) {
            String name = field.getKey();
            Object v = record.get(name);
            if (v == null) {
                return Verdict.rejected("malformed", "required field " + name + " is missing or null", planId);
            }
            if (!field.getValue().isInstance(v)) {
                return Verdict.rejected("malformed", "field " + name + " has the wrong type", planId);
            }
            if (NON_EMPTY.contains(name) && ((String) v).isEmpty()) {
                return Verdict.rejected("malformed", "field " + name + " is empty", planId);
            }
            if (TIMES.contains(name) && (Long) v < 0) {
                return Verdict.rejected("malformed", "field " + name + " is before 1970", planId);
            }
        }
        String signature = (String) record.get("signature");
        if (!signature.matches("[0-9a-f]{128}")) {
            return Verdict.rejected("malformed", "signature is not 128 lowercase hex characters", planId);
        }
        String keyId = (String) record.get("key_id");
        if (keyId.codePointCount(0, keyId.length()) > 64) {
            return Verdict.rejected("malformed", "key_id is longer than 64 characters", planId);
        }
        long sequence = (Long) record.get("sequence");
        if (sequence < 1 || sequence > MAX_SEQUENCE) {
            return Verdict.rejected("malformed", "sequence " + sequence + " is outside 1.." + MAX_SEQUENCE, planId);
        }
        if (!withdrawal && !((String) record.get("plan_digest")).matches("[0-9a-f]{64}")) {
            return Verdict.rejected("malformed", "plan_digest is not 64 lowercase hex characters", planId);
        }
        PublicKey key = keys.get(keyId);
        if (key == null) {
            return Verdict.rejected("unknown_key", "key_id '" + keyId + "' is not a configured verify key", planId);
        }
        if (revoked.contains(keyId)) {
            return Verdict.rejected("revoked_key", "key_id '" + keyId + "' was revoked by a signed key revocation",
                    planId);
        }
        Map<String, Object> signed = new LinkedHashMap<>(record);
        signed.remove("signature");
        if (!ed25519Verifies(key, CanonicalJson.bytes(signed), hex(signature))) {
            return Verdict.rejected("bad_signature", "Ed25519 signature does not verify with key '" + keyId + "'",
                    planId);
        }
        Plan plan = null;
        if (!withdrawal) {
            Object parsedPlan = readPlan(record, planId);
            if (parsedPlan instanceof Verdict) {
                return (Verdict) parsedPlan;
            }
            plan = (Plan) parsedPlan;
        }
        String recordGroup = (String) record.get("group_id");
        if (!recordGroup.equals(groupId)) {
            return Verdict.rejected("wrong_group", "plan " + planId + " is for group '" + recordGroup + "', not '"
                    + groupId + "'", planId);
        }
        long createdAt = (Long) record.get("created_at");
        if (createdAt > nowMs + clockSkewMs) {
            return Verdict.rejected("future", "plan " + planId + " created_at " + createdAt + " is after now "
                    + nowMs + " + clock skew " + clockSkewMs, planId);
        }
        if (highestSequence != null && sequence < highestSequence) {
            return Verdict.rejected("replayed", "plan " + planId + " has sequence " + sequence
                    + ", lower than " + highestSequence + " already seen", planId);
        }
        if (withdrawal) {
            return Verdict.withdrawn(planId, sequence, keyId);
        }
        return Verdict.plan(plan, keyId);
    }

    /** The plan, or the Verdict rejecting its fields. */
    private static Object readPlan(Map<String, Object> record, String planId) {
        Map<?, ?> configFields = (Map<?, ?>) record.get("configs");
        long[] values = new long[PlanConfigs.NAMES.size()];
        for (int i = 0; i < values.length; i++) {
            String name = PlanConfigs.NAMES.get(i);
            Object v = configFields.get(name);
            if (!(v instanceof Long) || (Long) v < PlanConfigs.minimum(i) || (Long) v > PlanConfigs.maximum(i)) {
                return Verdict.rejected("malformed", "configs." + name + " must be an integer in "
                        + PlanConfigs.minimum(i) + ".." + PlanConfigs.maximum(i), planId);
            }
            values[i] = (Long) v;
        }
        // Bounded above: the counts fit an int, and a deadline now + interval cannot overflow a long.
        PlanConfigs configs = new PlanConfigs(values[0], (int) values[1], (int) values[2], values[3]);
        Map<String, ClientTasks> target = new TreeMap<>(CodePoints.ORDER);
        for (Map.Entry<?, ?> entry : ((Map<?, ?>) record.get("target")).entrySet()) {
            String pid = (String) entry.getKey();
            if (!(entry.getValue() instanceof Map)) {
                return Verdict.rejected("malformed", "target[" + shown(pid) + "] is not an object", planId);
            }
            Map<?, ?> roles = (Map<?, ?>) entry.getValue();
            Set<Task> active = taskSet(roles.get("active"));
            Set<Task> standby = taskSet(roles.get("standby"));
            if (active == null || standby == null) {
                return Verdict.rejected("malformed", "target[" + shown(pid) + "] must be {active: [task ids],"
                        + " standby: [task ids]}, each <subtopology>_<partition> in 0..2147483647", planId);
            }
            target.put(pid, new ClientTasks(active, standby, Set.of()));
        }
        List<Task> moveOrder = new ArrayList<>();
        Set<Task> seen = new HashSet<>();
        for (Object item : (List<?>) record.get("move_order")) {
            Task task = item instanceof String ? Task.parseOrNull((String) item) : null;
            if (task == null) {
                return Verdict.rejected("malformed", "move_order holds " + shown(item)
                        + ", not a task id <subtopology>_<partition> with each part in 0..2147483647", planId);
            }
            if (seen.add(task)) {
                moveOrder.add(task);
            }
        }
        String digest = sha256Hex(CanonicalJson.bytes(record.get("target")));
        if (!digest.equals(record.get("target_digest"))) {
            return Verdict.rejected("digest_mismatch", "target_digest does not match the target (SHA-256 "
                    + digest + ")", planId);
        }
        if (!planDigest(record).equals(record.get("plan_digest"))) {
            return Verdict.rejected("digest_mismatch", "plan_digest does not match the plan's body", planId);
        }
        return new Plan(planId, (String) record.get("group_id"), (Long) record.get("created_at"),
                (Long) record.get("valid_until"), configs, target, moveOrder, (Long) record.get("sequence"));
    }

    /**
     * SHA-256 (hex) of the canonical JSON of a record's body fields exactly as it carries them: what its
     * {@code plan_digest} must be (Python: {@code plans.body_digest}).
     */
    public static String planDigest(Map<String, ?> record) {
        Map<String, Object> body = new LinkedHashMap<>();
        for (String name : BODY_FIELDS) {
            body.put(name, record.get(name));
        }
        return sha256Hex(CanonicalJson.bytes(body));
    }

    /** A value for a reason, cut to 40 characters with its length said: a hostile id may be a megabyte. */
    static String shown(Object value) {
        String text = value instanceof String ? "'" + value + "'" : String.valueOf(value);
        return text.length() <= 42 ? text : text.substring(0, 41) + "'... (" + (text.length() - 2) + " characters)";
    }

    private static int clampToInt(long v) {
        return (int) Math.min(v, Integer.MAX_VALUE);
    }

    private static Set<Task> taskSet(Object value) {
        if (!(value instanceof List)) {
            return null;
        }
        Set<Task> tasks = new HashSet<>();
        for (Object item : (List<?>) value) {
            Task task = item instanceof String ? Task.parseOrNull((String) item) : null;
            if (task == null) {
                return null;
            }
            tasks.add(task);
        }
        return tasks;
    }

    static boolean ed25519Verifies(PublicKey key, byte[] message, byte[] signature) {
        try {
            Signature verifier = Signature.getInstance("Ed25519");
            verifier.initVerify(key);
            verifier.update(message);
            return verifier.verify(signature);
        } catch (GeneralSecurityException e) {
            // Encodings the JDK refuses outright (e.g. a non-canonical S) are simply not valid signatures.
            return false;
        }
    }

    public static String sha256Hex(byte[] data) {
        try {
            return toHex(MessageDigest.getInstance("SHA-256").digest(data));
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException("the JDK has no SHA-256", e);
        }
    }

    static byte[] hex(String s) {
        byte[] out = new byte[s.length() / 2];
        for (int i = 0; i < out.length; i++) {
            out[i] = (byte) Integer.parseInt(s.substring(2 * i, 2 * i + 2), 16);
        }
        return out;
    }

    public static String toHex(byte[] bytes) {
        StringBuilder out = new StringBuilder(bytes.length * 2);
        for (byte b : bytes) {
            out.append(Character.forDigit((b >> 4) & 0xf, 16)).append(Character.forDigit(b & 0xf, 16));
        }
        return out.toString();
    }

}
