package io.rebalanceplanner.core;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import com.fasterxml.jackson.databind.JsonNode;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestFactory;

/** schemas/vectors/restored_offsets_cases.json: the records Python accepts, Java accepts with the same restores. */
class RestoredOffsetsVectorsTest {
    @TestFactory
    List<DynamicTest> records() throws IOException {
        JsonNode root = Vectors.read("restored_offsets_cases.json");
        List<DynamicTest> tests = new ArrayList<>();
        for (JsonNode c : root.get("cases")) {
            String name = c.get("name").asText();
            tests.add(DynamicTest.dynamicTest(name, () -> {
                byte[] value = c.get("value").asText().getBytes(StandardCharsets.UTF_8);
                String key = c.get("key").asText();
                if (!c.get("accepted").asBoolean()) {
                    assertThrows(RestoredOffsets.Rejected.class, () -> RestoredOffsets.decode(key, value), name);
                    return;
                }
                RestoredOffsets.Report report = RestoredOffsets.decode(key, value);
                assertEquals(restores(c.get("restores")), report.restores(), name);
            }));
        }
        return tests;
    }

    @Test
    void encodesTheSharedBytes() throws IOException {
        JsonNode e = Vectors.read("restored_offsets_cases.json").get("encoding");
        byte[] value = RestoredOffsets.encode(e.get("group_id").asText(), e.get("process_id").asText(),
                e.get("reported_at").asLong(), restores(e.get("restores")));
        assertArrayEquals(e.get("value").asText().getBytes(StandardCharsets.UTF_8), value,
                new String(value, StandardCharsets.UTF_8));
        assertEquals(e.get("key").asText(), RestoredOffsets.key(e.get("group_id").asText(),
                e.get("process_id").asText()));
    }

    private static Map<Task, RestoredOffsets.TaskRestore> restores(JsonNode byTask) {
        Map<Task, RestoredOffsets.TaskRestore> out = new TreeMap<>();
        Iterator<Map.Entry<String, JsonNode>> it = byTask.properties().iterator();
        while (it.hasNext()) {
            Map.Entry<String, JsonNode> t = it.next();
            out.put(Task.parseOrNull(t.getKey()),
                    new RestoredOffsets.TaskRestore(t.getValue().get(0).asLong(), t.getValue().get(1).asLong()));
        }
        return out;
    }
}
