package io.rebalanceplanner.core;

import static org.junit.jupiter.api.Assertions.assertEquals;

import com.fasterxml.jackson.databind.JsonNode;
import java.io.IOException;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.TestFactory;

/** Every case of schemas/vectors/plan_ledger_cases.json: a group's records in order, and the plan honored. */
class PlanLedgerVectorsTest {
    @TestFactory
    List<DynamicTest> planLedgerVectors() throws IOException {
        JsonNode root = Vectors.read("plan_ledger_cases.json");
        PlanVerifier verifier = Vectors.verifier(root);
        long now = root.get("now_ms").asLong();
        List<DynamicTest> tests = new ArrayList<>();
        for (JsonNode c : root.get("cases")) {
            String name = c.get("name").asText();
            tests.add(DynamicTest.dynamicTest(name, () -> check(verifier, now, c, name)));
        }
        return tests;
    }

    private static void check(PlanVerifier verifier, long now, JsonNode c, String name) {
        Long floor = c.hasNonNull("remembered_sequence") ? c.get("remembered_sequence").asLong() : null;
        PlanLedger ledger = new PlanLedger(c.get("group_id").asText()).remember(floor);
        for (JsonNode entry : c.get("records")) {
            byte[] value = entry.hasNonNull("record_b64") ? SignedPlanVectorsTest.value(entry) : null;
            ledger = ledger.offer(value, verifier, now);
        }
        PlanLedger.Choice choice = ledger.recheck(verifier, now).choice(now);
        JsonNode expected = c.get("expected");
        String want = text(expected.get("plan_id")) + " " + text(expected.get("reason_code")) + " "
                + text(expected.get("highest_sequence"));
        String got = (choice.plan() == null ? null : choice.plan().planId()) + " " + choice.reasonCode() + " "
                + choice.sequence();
        assertEquals(want, got, name + ": " + choice);
    }

    private static String text(JsonNode n) {
        return n == null || n.isNull() ? "null" : n.asText();
    }
}
