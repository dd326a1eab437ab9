package io.rebalanceplanner.core;

import static org.junit.jupiter.api.Assertions.assertEquals;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.security.PublicKey;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestFactory;

/**
 * The settings' bounds: PlanConfigs holds those of schemas/kip441_settings.json (their one definition), and every
 * case of schemas/vectors/config_bounds.json (plans at and past each bound) is judged as Python judges it.
 */
class ConfigBoundsVectorsTest {
    @Test
    void planConfigsHoldTheBoundsOfTheSettingsDefinition() throws IOException {
        JsonNode definition = new ObjectMapper().readTree(
                Vectors.dir().resolve("../kip441_settings.json").toFile()).get("settings");
        JsonNode vectors = Vectors.read("config_bounds.json").get("bounds");
        List<String> names = new ArrayList<>();
        definition.fieldNames().forEachRemaining(names::add);
        assertEquals(names, PlanConfigs.NAMES);
        for (int i = 0; i < names.size(); i++) {
            String name = names.get(i);
            assertEquals(definition.get(name).get("minimum").asLong(), PlanConfigs.minimum(i), name);
            assertEquals(definition.get(name).get("maximum").asLong(), PlanConfigs.maximum(i), name);
            assertEquals(vectors.get(name).get("maximum").asLong(), PlanConfigs.maximum(i), name);
        }
        // A deadline now + the longest interval fits a long for any time before the year 292 million.
        assertEquals(Long.MAX_VALUE - PlanConfigs.maximum(3) > System.currentTimeMillis(), true);
    }

    @TestFactory
    List<DynamicTest> configBoundVectors() throws IOException {
        JsonNode root = Vectors.read("config_bounds.json");
        Map<String, PublicKey> keys = new TreeMap<>();
        Iterator<Map.Entry<String, JsonNode>> it = root.get("keys").properties().iterator();
        while (it.hasNext()) {
            Map.Entry<String, JsonNode> e = it.next();
            keys.put(e.getKey(), PlanVerifier.ed25519PublicKey(e.getValue().asText()));
        }
        PlanVerifier verifier = new PlanVerifier(keys, root.get("clock_skew_ms").asLong());
        long now = root.get("now_ms").asLong();
        List<DynamicTest> tests = new ArrayList<>();
        for (JsonNode c : root.get("cases")) {
            String name = c.get("name").asText();
            tests.add(DynamicTest.dynamicTest(name, () -> SignedPlanVectorsTest.check(verifier, now, c, name)));
        }
        return tests;
    }
}
