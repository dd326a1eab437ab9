package io.rebalanceplanner.core;

import static org.junit.jupiter.api.Assertions.assertEquals;

import com.fasterxml.jackson.databind.JsonNode;
import java.io.IOException;
import java.util.ArrayList;
import java.util.Base64;
import java.util.List;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.TestFactory;

/** Every case of schemas/vectors/signed_plans.json, one JUnit test each, named after the case. */
class SignedPlanVectorsTest {
    @TestFactory
    List<DynamicTest> signedPlanVectors() throws IOException {
        JsonNode root = Vectors.read("signed_plans.json");
        PlanVerifier verifier = Vectors.verifier(root);
        long now = root.get("now_ms").asLong();
        List<DynamicTest> tests = new ArrayList<>();
        for (JsonNode c : root.get("cases")) {
            String name = c.get("name").asText();
            tests.add(DynamicTest.dynamicTest(name, () -> check(verifier, now, c, name)));
        }
        return tests;
    }

    /** A vector's record value: {@code record_b64} decoded, padded with spaces to {@code pad_with_spaces_to}. */
    static byte[] value(JsonNode c) {
        byte[] value = Base64.getDecoder().decode(c.get("record_b64").asText());
        if (c.hasNonNull("pad_with_spaces_to")) {
            int size = c.get("pad_with_spaces_to").asInt();
            byte[] padded = new byte[size];
            System.arraycopy(value, 0, padded, 0, value.length);
            java.util.Arrays.fill(padded, value.length, size, (byte) ' ');
            value = padded;
        }
        return value;
    }

    static void check(PlanVerifier verifier, long now, JsonNode c, String name) {
        byte[] value = value(c);
        Long newest = !c.hasNonNull("highest_sequence") ? null : c.get("highest_sequence").asLong();
        Verdict verdict = verifier.verify(value, c.get("group_id").asText(), now, newest);
        String expectedOutcome = c.get("outcome").asText();
        String expectedReason = c.get("reason_code").isNull() ? null : c.get("reason_code").asText();
        assertEquals(expectedOutcome + " " + expectedReason,
                verdict.outcome().name().toLowerCase(java.util.Locale.ROOT) + " " + verdict.reasonCode(),
                name + ": " + verdict);
        if (c.hasNonNull("plan_id") && !"rejected".equals(expectedOutcome)) {
            assertEquals(c.get("plan_id").asText(), verdict.planId(), name);
        }
    }
}
