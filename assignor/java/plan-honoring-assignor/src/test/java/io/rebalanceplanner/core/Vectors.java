package io.rebalanceplanner.core;

import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.security.PublicKey;
import java.util.HashSet;
import java.util.Iterator;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;

/** The shared vector files of schemas/vectors, read with Jackson so the parser under test is not the reader. */
final class Vectors {
    private Vectors() {}

    static Path dir() {
        return Paths.get(System.getProperty("rebalance.planner.vectors.dir", "../../../schemas/vectors"));
    }

    static JsonNode read(String name) throws IOException {
        Path file = dir().resolve(name);
        assertTrue(Files.isRegularFile(file), "shared vector file missing: " + file.toAbsolutePath());
        return new ObjectMapper().readTree(file.toFile());
    }

    /** The verifier a signed-record vector file describes: its {@code keys} and {@code clock_skew_ms}. */
    static PlanVerifier verifier(JsonNode root) {
        Map<String, PublicKey> keys = new TreeMap<>();
        Iterator<Map.Entry<String, JsonNode>> it = root.get("keys").properties().iterator();
        while (it.hasNext()) {
            Map.Entry<String, JsonNode> e = it.next();
            keys.put(e.getKey(), PlanVerifier.ed25519PublicKey(e.getValue().asText()));
        }
        return new PlanVerifier(keys, root.get("clock_skew_ms").asLong());
    }

    static Set<Task> tasks(JsonNode array) {
        Set<Task> out = new HashSet<>();
        for (JsonNode n : array) {
            Task t = Task.parseOrNull(n.asText());
            if (t == null) {
                throw new IllegalArgumentException("not a task id in a vector: " + n);
            }
            out.add(t);
        }
        return out;
    }
}
