package io.rebalanceplanner.core;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import java.io.IOException;
import java.util.ArrayList;
import java.util.Base64;
import java.util.List;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.TestFactory;

/** schemas/vectors/hostile_numbers.json: task ids and signed plans with hostile numbers, refused as Python does. */
class HostileNumberVectorsTest {
    @TestFactory
    List<DynamicTest> taskIds() throws IOException {
        JsonNode root = Vectors.read("hostile_numbers.json");
        List<DynamicTest> tests = new ArrayList<>();
        for (JsonNode c : root.get("task_ids")) {
            String text = c.get("text").asText();
            String name = "task id " + PlanVerifier.shown(text);
            tests.add(DynamicTest.dynamicTest(name, () -> {
                Task task = Task.parseOrNull(text);
                if (c.get("task").isNull()) {
                    assertNull(task, name);
                } else {
                    assertEquals(new Task(c.get("task").get(0).asLong(), c.get("task").get(1).asLong()), task, name);
                }
            }));
        }
        return tests;
    }

    @TestFactory
    List<DynamicTest> signedPlans() throws IOException {
        JsonNode root = Vectors.read("hostile_numbers.json");
        PlanVerifier verifier = Vectors.verifier(root);
        long now = root.get("now_ms").asLong();
        int maxReason = root.get("max_reason_chars").asInt();
        List<DynamicTest> tests = new ArrayList<>();
        for (JsonNode c : root.get("signed_plans")) {
            String name = c.get("name").asText();
            tests.add(DynamicTest.dynamicTest(name, () -> {
                byte[] value = Base64.getDecoder().decode(c.get("record_b64").asText());
                Verdict verdict = verifier.verify(value, c.get("group_id").asText(), now, null);
                String expected = c.get("outcome").asText() + " "
                        + (c.get("reason_code").isNull() ? null : c.get("reason_code").asText());
                assertEquals(expected, verdict.outcome().name().toLowerCase(java.util.Locale.ROOT) + " "
                        + verdict.reasonCode(), name + ": " + verdict);
                if (verdict.fallbackReason() != null) {
                    assertTrue(verdict.fallbackReason().length() <= maxReason, name + ": " + verdict.fallbackReason());
                }
            }));
        }
        return tests;
    }
}
