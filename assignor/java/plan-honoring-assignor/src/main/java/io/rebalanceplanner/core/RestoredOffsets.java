package io.rebalanceplanner.core;

import java.util.Map;
import java.util.Set;
import java.util.TreeMap;

/**
 * A restored-offsets report (schemas/restored_offsets.schema.json): what one Kafka Streams member's state
 * restoration replayed, per task, published by that member itself on the reports topic under
 * {@code <group>/<process>/restored}, because the leader that writes its state report never sees it. Pure: the
 * same rules as Python's {@code assignor.protocol.restored_offsets} (shared vectors restored_offsets_cases.json).
 */
public final class RestoredOffsets {
    public static final long SCHEMA_VERSION = 1;
    public static final String KEY_SUFFIX = "/restored";
    public static final int MAX_BYTES = 1 << 20;
    public static final int MAX_TASKS = 100_000;
    public static final long MAX_EPOCH_MS = 253_402_300_799_999L;
    public static final int MAX_ID_CHARS = 249;

    /** One task's latest restore on the member: records replayed from its changelogs, and when it began. */
    public record TaskRestore(long offsets, long startedAt) {}

    /** A decoded report. */
    public record Report(String groupId, String processId, long reportedAt, Map<Task, TaskRestore> restores) {}

    /** A record that is not a restored-offsets report; the message names what is wrong. */
    public static final class Rejected extends Exception {
        private static final long serialVersionUID = 1L;

        public Rejected(String message) {
            super(message);
        }
    }

    private RestoredOffsets() {}

    public static String key(String groupId, String processId) {
        return groupId + "/" + processId + KEY_SUFFIX;
    }

    /** The record's value: canonical JSON, byte for byte what Python's encoder writes. */
    public static byte[] encode(String groupId, String processId, long reportedAt, Map<Task, TaskRestore> restores) {
        Map<String, Object> byTask = new TreeMap<>();
        for (Map.Entry<Task, TaskRestore> e : restores.entrySet()) {
            Map<String, Object> r = new TreeMap<>();
            r.put("offsets", e.getValue().offsets());
            r.put("started_at", e.getValue().startedAt());
            byTask.put(e.getKey().toString(), r);
        }
        Map<String, Object> body = new TreeMap<>();
        body.put("schema_version", SCHEMA_VERSION);
        body.put("group_id", groupId);
        body.put("process_id", processId);
        body.put("reported_at", reportedAt);
        body.put("restored_offsets", byTask);
        return CanonicalJson.bytes(body);
    }

    /**
     * The report a record holds, or Rejected naming the first rule it breaks. StrictJson bounds every integer as
     * text (int64) before converting it; the ranges are checked after.
     */
    public static Report decode(String key, byte[] value) throws Rejected {
        Object parsed;
        try {
            parsed = StrictJson.parse(value, MAX_BYTES, StrictJson.MAX_DEPTH);
        } catch (JsonException e) {
            throw new Rejected("malformed: " + e.getMessage());
        }
        if (!(parsed instanceof Map<?, ?> fields)) {
            throw new Rejected("not a JSON object");
        }
        for (String name : new String[] {"schema_version", "group_id", "process_id", "reported_at",
                "restored_offsets"}) {
            if (!fields.containsKey(name)) {
                throw new Rejected("missing field " + name);
            }
        }
        if (!Long.valueOf(SCHEMA_VERSION).equals(fields.get("schema_version"))) {
            throw new Rejected("schema_version must be " + SCHEMA_VERSION);
        }
        String group = id(fields.get("group_id"), "group_id");
        String process = id(fields.get("process_id"), "process_id");
        long reportedAt = bounded(fields.get("reported_at"), 0, MAX_EPOCH_MS, "reported_at");
        Map<Task, TaskRestore> restores = restores(fields.get("restored_offsets"));
        if (!key(group, process).equals(key)) {
            throw new Rejected("key " + key + " but the report is from " + key(group, process));
        }
        return new Report(group, process, reportedAt, restores);
    }

    private static Map<Task, TaskRestore> restores(Object value) throws Rejected {
        if (!(value instanceof Map<?, ?> byTask)) {
            throw new Rejected("restored_offsets must be an object of task id -> restore");
        }
        if (byTask.size() > MAX_TASKS) {
            throw new Rejected("restored_offsets names " + byTask.size() + " tasks, more than " + MAX_TASKS);
        }
        Map<Task, TaskRestore> out = new TreeMap<>();
        for (Map.Entry<?, ?> e : byTask.entrySet()) {
            String text = (String) e.getKey();
            Task task = Task.parseOrNull(text);
            if (task == null) {
                throw new Rejected("restored_offsets: " + PlanVerifier.shown(text) + " is not a task id");
            }
            String where = "restored_offsets/" + text;
            if (!(e.getValue() instanceof Map<?, ?> r) || !r.keySet().equals(Set.of("offsets", "started_at"))) {
                throw new Rejected(where + " must be {offsets, started_at}");
            }
            out.put(task, new TaskRestore(bounded(r.get("offsets"), 0, Long.MAX_VALUE, where + "/offsets"),
                    bounded(r.get("started_at"), 0, MAX_EPOCH_MS, where + "/started_at")));
        }
        return out;
    }

    private static String id(Object value, String what) throws Rejected {
        if (!(value instanceof String text) || text.isEmpty() || text.length() > MAX_ID_CHARS) {
            throw new Rejected(what + " must be a string of 1.." + MAX_ID_CHARS + " characters");
        }
        return text;
    }

    private static long bounded(Object value, long low, long high, String what) throws Rejected {
        if (!(value instanceof Long n) || n < low || n > high) {
            throw new Rejected(what + " must be an integer in " + low + ".." + high);
        }
        return n;
    }
}
