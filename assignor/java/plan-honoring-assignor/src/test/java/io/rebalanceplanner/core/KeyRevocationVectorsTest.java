package io.rebalanceplanner.core;

import static org.junit.jupiter.api.Assertions.assertEquals;

import com.fasterxml.jackson.databind.JsonNode;
import java.io.IOException;
import java.util.ArrayList;
import java.util.Base64;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.TestFactory;

/** Every case of schemas/vectors/key_revocation_cases.json: revocation records, and ledgers that meet them. */
class KeyRevocationVectorsTest {
    @TestFactory
    List<DynamicTest> revocationRecords() throws IOException {
        JsonNode root = Vectors.read("key_revocation_cases.json");
        PlanVerifier verifier = Vectors.verifier(root);
        List<DynamicTest> tests = new ArrayList<>();
        for (JsonNode c : root.get("revocations")) {
            String name = c.get("name").asText();
            tests.add(DynamicTest.dynamicTest(name, () -> {
                KeyRevocation.Result got = KeyRevocation.read(Base64.getDecoder().decode(c.get("record_b64").asText()),
                        verifier.keys());
                assertEquals(text(c.get("revoked_key_id")) + " " + text(c.get("reason_code")),
                        got.revokedKeyId() + " " + got.reasonCode(), name + ": " + got);
            }));
        }
        return tests;
    }

    @TestFactory
    List<DynamicTest> ledgersWithRevocations() throws IOException {
        JsonNode root = Vectors.read("key_revocation_cases.json");
        PlanVerifier base = Vectors.verifier(root);
        long now = root.get("now_ms").asLong();
        List<DynamicTest> tests = new ArrayList<>();
        for (JsonNode c : root.get("ledger_cases")) {
            String name = c.get("name").asText();
            tests.add(DynamicTest.dynamicTest(name, () -> check(base, now, c, name)));
        }
        return tests;
    }

    private static void check(PlanVerifier base, long now, JsonNode c, String name) {
        PlanVerifier verifier = base;
        PlanLedger ledger = new PlanLedger(c.get("group_id").asText());
        Set<String> revoked = new HashSet<>();
        for (JsonNode event : c.get("events")) {
            if (event.has("record")) {
                ledger = ledger.offer(Base64.getDecoder().decode(event.get("record").asText()), verifier, now);
                continue;
            }
            KeyRevocation.Result result = KeyRevocation.read(
                    Base64.getDecoder().decode(event.get("revocation").asText()), base.keys());
            if (result.revokedKeyId() == null) {
                continue;
            }
            revoked.add(result.revokedKeyId());
            verifier = verifier.revoking(revoked);
            ledger = ledger.revoke(revoked);
        }
        PlanLedger.Choice choice = ledger.recheck(verifier, now).choice(now);
        JsonNode expected = c.get("expected");
        List<String> wantRevoked = new ArrayList<>();
        expected.get("revoked").forEach(n -> wantRevoked.add(n.asText()));
        String want = text(expected.get("plan_id")) + " " + text(expected.get("reason_code")) + " "
                + text(expected.get("highest_sequence")) + " " + wantRevoked;
        String got = (choice.plan() == null ? null : choice.plan().planId()) + " " + choice.reasonCode() + " "
                + choice.sequence() + " " + new ArrayList<>(new TreeSet<>(revoked));
        assertEquals(want, got, name + ": " + choice);
    }

    private static String text(JsonNode n) {
        return n == null || n.isNull() ? "null" : n.asText();
    }
}
