package io.rebalanceplanner.reference;

import io.rebalanceplanner.core.CanonicalJson;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.util.LinkedHashMap;
import java.util.Map;

/** One JSON line per event, {@code {"t": epoch_ms, "event": name, ...}}, the Python runtime's vocabulary. */
final class Events implements AutoCloseable {
    private final OutputStream out;

    Events(String path) throws IOException {
        this.out = path == null ? null : new FileOutputStream(path, true);
    }

    synchronized void emit(String event, Object... keyValues) {
        if (out == null) {
            return;
        }
        Map<String, Object> record = new LinkedHashMap<>();
        record.put("t", System.currentTimeMillis());
        record.put("event", event);
        for (int i = 0; i + 1 < keyValues.length; i += 2) {
            record.put((String) keyValues[i], keyValues[i + 1]);
        }
        try {
            // Lines must never interleave: one write, flushed, per event.
            out.write((CanonicalJson.string(record) + "\n").getBytes(StandardCharsets.UTF_8));
            out.flush();
        } catch (IOException e) {
            System.err.println("events: " + e);
        }
    }

    @Override
    public synchronized void close() throws IOException {
        if (out != null) {
            out.close();
        }
    }
}
