package io.rebalanceplanner.broker;

import io.rebalanceplanner.core.CanonicalJson;
import io.rebalanceplanner.core.PlanVerifier;
import java.nio.charset.StandardCharsets;
import java.security.GeneralSecurityException;
import java.security.KeyPair;
import java.security.KeyPairGenerator;
import java.security.PublicKey;
import java.security.Signature;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

/** Signs plan records as the pipeline's publish stage does (a key generated per test run). */
final class Signer {
    static final String KEY_ID = "test-key";

    private final KeyPair keys;

    Signer() {
        try {
            keys = KeyPairGenerator.getInstance("Ed25519").generateKeyPair();
        } catch (GeneralSecurityException e) {
            throw new IllegalStateException(e);
        }
    }

    Map<String, PublicKey> verifyKeys() {
        return Map.of(KEY_ID, keys.getPublic());
    }

    /** The raw public key as {@code rebalance.planner.verify.keys} takes it. */
    String verifyKeysSetting() {
        byte[] der = keys.getPublic().getEncoded();
        return KEY_ID + "=" + PlanVerifier.toHex(Arrays.copyOfRange(der, der.length - 32, der.length));
    }

    /** A plan record. @param target process id to {active: [...], standby: [...]} */
    byte[] plan(String groupId, String planId, long createdAt, long validUntil, Map<String, Object> configs,
            Map<String, Map<String, List<String>>> target, List<String> moveOrder) {
        Map<String, Object> record = new LinkedHashMap<>();
        record.put("schema_version", 2L);
        record.put("plan_id", planId);
        record.put("group_id", groupId);
        record.put("snapshot_id", "snap-1");
        record.put("created_at", createdAt);
        record.put("valid_until", validUntil);
        record.put("approved_by", "alice");
        record.put("approved_at", createdAt);
        record.put("configs", configs);
        Map<String, Object> t = new TreeMap<>();
        target.forEach((pid, roles) -> {
            Map<String, Object> r = new TreeMap<>();
            r.put("active", new ArrayList<>(roles.getOrDefault("active", List.of())));
            r.put("standby", new ArrayList<>(roles.getOrDefault("standby", List.of())));
            t.put(pid, r);
        });
        record.put("target", t);
        record.put("move_order", new ArrayList<>(moveOrder));
        record.put("target_digest", PlanVerifier.sha256Hex(CanonicalJson.bytes(t)));
        record.put("plan_digest", PlanVerifier.planDigest(record));
        record.put("sequence", createdAt);
        return sign(record);
    }

    byte[] withdrawal(String groupId, String planId, long createdAt) {
        Map<String, Object> record = new LinkedHashMap<>();
        record.put("schema_version", 2L);
        record.put("plan_id", planId);
        record.put("group_id", groupId);
        record.put("created_at", createdAt);
        record.put("sequence", createdAt);
        record.put("withdrawn", true);
        return sign(record);
    }

    /** A key revocation of {@code revokedKeyId}, signed by this key. */
    byte[] revocation(String revokedKeyId, long revokedAt) {
        Map<String, Object> record = new LinkedHashMap<>();
        record.put("schema_version", 1L);
        record.put("type", "key_revocation");
        record.put("revoked_key_id", revokedKeyId);
        record.put("revoked_at", revokedAt);
        record.put("revoked_by", "security");
        record.put("reason", "rotated out");
        return sign(record);
    }

    static Map<String, Object> configs(long acceptableLag, long maxWarmups, long standbys) {
        Map<String, Object> c = new LinkedHashMap<>();
        c.put("acceptable_recovery_lag", acceptableLag);
        c.put("max_warmup_replicas", maxWarmups);
        c.put("num_standby_replicas", standbys);
        c.put("probing_rebalance_interval_ms", 60_000L);
        return c;
    }

    private byte[] sign(Map<String, Object> record) {
        record.put("key_id", KEY_ID);
        try {
            Signature s = Signature.getInstance("Ed25519");
            s.initSign(keys.getPrivate());
            s.update(CanonicalJson.bytes(record));
            record.put("signature", PlanVerifier.toHex(s.sign()));
        } catch (GeneralSecurityException e) {
            throw new IllegalStateException(e);
        }
        return CanonicalJson.string(record).getBytes(StandardCharsets.UTF_8);
    }
}
