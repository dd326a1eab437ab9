package io.rebalanceplanner.core;

import java.nio.charset.StandardCharsets;
import java.security.PublicKey;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Set;
import java.util.regex.Pattern;

/**
 * Signed key revocations on the plans topic (schemas/key_revocation.schema.json; Python's
 * {@code assignor.protocol.key_revocation} is the same rule, schemas/vectors/key_revocation_cases.json).
 *
 * <p>A revocation names one key id and is honored when it verifies with any configured verify key (the revoked one
 * included). Revocations are never undone, so their order does not matter.
 */
public final class KeyRevocation {
    /** The plans-topic key prefix of a revocation: one key per revoked key id, so compaction keeps each. */
    public static final String TOPIC_KEY_PREFIX = "_rbp_key_revocation/";
    public static final long SCHEMA_VERSION = 1;
    public static final int MAX_BYTES = 16 * 1024;
    /**
     * What one reader keeps of the revocation records it meets on the plans topic (about 3,000 real ones): only the
     * pipeline may write that topic, and a reader's memory stays bounded whatever it holds (Python: same bound).
     */
    public static final int MAX_HELD_BYTES = 1024 * 1024;
    public static final int MAX_TEXT = 1024;
    private static final Pattern KEY_ID = Pattern.compile("[A-Za-z0-9._-]{1,64}");
    private static final Pattern SIGNATURE = Pattern.compile("[0-9a-f]{128}");
    private static final Map<String, Class<?>> FIELDS = new LinkedHashMap<>();

    static {
        FIELDS.put("schema_version", Long.class);
        FIELDS.put("type", String.class);
        FIELDS.put("revoked_key_id", String.class);
        FIELDS.put("revoked_at", Long.class);
        FIELDS.put("revoked_by", String.class);
        FIELDS.put("reason", String.class);
        FIELDS.put("key_id", String.class);
        FIELDS.put("signature", String.class);
    }

    /**
     * What reading one revocation record gave.
     *
     * @param revokedKeyId the key id revoked, or null when the record does not verify
     * @param reasonCode why it does not (a reason code of schemas/vectors/README.md), or null
     * @param detail the reason's detail, or null
     */
    public record Result(String revokedKeyId, String reasonCode, String detail) {}

    private KeyRevocation() {}

    /** Whether a plans-topic record key is a revocation's. */
    public static boolean isRevocationKey(byte[] key) {
        byte[] prefix = TOPIC_KEY_PREFIX.getBytes(StandardCharsets.UTF_8);
        if (key == null || key.length < prefix.length) {
            return false;
        }
        for (int i = 0; i < prefix.length; i++) {
            if (key[i] != prefix[i]) {
                return false;
            }
        }
        return true;
    }

    /** The key ids the verifiable revocations among {@code values} revoke; the others revoke nothing. */
    public static Set<String> revokedKeyIds(Iterable<byte[]> values, Map<String, PublicKey> keys) {
        Set<String> revoked = new HashSet<>();
        for (byte[] value : values) {
            if (value != null) {
                Result result = read(value, keys);
                if (result.revokedKeyId() != null) {
                    revoked.add(result.revokedKeyId());
                }
            }
        }
        return revoked;
    }

    /** The revocation a record carries, verified with {@code keys}, or why not. */
    public static Result read(byte[] value, Map<String, PublicKey> keys) {
        if (value.length > MAX_BYTES) {
            return malformed(value.length + " bytes, more than " + MAX_BYTES);
        }
        Map<?, ?> record;
        try {
            Object parsed = StrictJson.parse(value, MAX_BYTES, StrictJson.MAX_DEPTH);
            if (!(parsed instanceof Map)) {
                return malformed("not a JSON object");
            }
            record = (Map<?, ?>) parsed;
        } catch (JsonException e) {
            return malformed(e.getMessage());
        }
        for (Map.Entry<String, Class<?>> field : FIELDS.entrySet()) {
            if (!record.containsKey(field.getKey())) {
                return malformed(field.getKey() + " is missing");
            }
            if (!field.getValue().isInstance(record.get(field.getKey()))) {
                return malformed(field.getKey() + " has the wrong type");
            }
        }
        for (Object name : record.keySet()) {
            if (!FIELDS.containsKey(name)) {
                return malformed("unexpected field '" + name + "'");
            }
        }
        long version = (Long) record.get("schema_version");
        if (version != SCHEMA_VERSION) {
            return new Result(null, "unsupported_version", "key revocation schema_version " + version
                    + " (supported: " + SCHEMA_VERSION + ")");
        }
        if (!"key_revocation".equals(record.get("type"))) {
            return malformed("type must be 'key_revocation'");
        }
        String revokedKeyId = (String) record.get("revoked_key_id");
        String keyId = (String) record.get("key_id");
        if (!KEY_ID.matcher(revokedKeyId).matches() || !KEY_ID.matcher(keyId).matches()) {
            return malformed("key ids must be 1-64 characters of letters, digits, '.', '_' or '-'");
        }
        long revokedAt = (Long) record.get("revoked_at");
        if (revokedAt < 0 || revokedAt > PlanVerifier.MAX_SEQUENCE) {
            return malformed("revoked_at " + revokedAt + " is outside 0.." + PlanVerifier.MAX_SEQUENCE);
        }
        String by = (String) record.get("revoked_by");
        String reason = (String) record.get("reason");
        int byLength = by.codePointCount(0, by.length());
        if (byLength < 1 || byLength > MAX_TEXT || reason.codePointCount(0, reason.length()) > MAX_TEXT) {
            return malformed("revoked_by must be 1-" + MAX_TEXT + " characters and reason at most " + MAX_TEXT);
        }
        String signature = (String) record.get("signature");
        if (!SIGNATURE.matcher(signature).matches()) {
            return malformed("signature must be 128 lowercase hex digits");
        }
        PublicKey key = keys.get(keyId);
        if (key == null) {
            return new Result(null, "unknown_key", "key revocation signed with key_id '" + keyId
                    + "', not a verify key");
        }
        Map<String, Object> signed = new LinkedHashMap<>();
        for (Map.Entry<?, ?> e : record.entrySet()) {
            if (!"signature".equals(e.getKey())) {
                signed.put((String) e.getKey(), e.getValue());
            }
        }
        if (!PlanVerifier.ed25519Verifies(key, CanonicalJson.bytes(signed), PlanVerifier.hex(signature))) {
            return new Result(null, "bad_signature", "key revocation signature does not verify with key '" + keyId
                    + "'");
        }
        return new Result(revokedKeyId, null, null);
    }

    private static Result malformed(String detail) {
        return new Result(null, "malformed", "key revocation: " + detail);
    }
}
