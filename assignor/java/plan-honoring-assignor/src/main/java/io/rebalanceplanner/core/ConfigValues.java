package io.rebalanceplanner.core;

import java.util.Map;
import java.util.TreeMap;

/**
 * Typed reads of an assignor's configuration map, each error naming the setting: one set of rules for the
 * plugin's settings and the broker-side assignor's.
 */
public final class ConfigValues {
    private ConfigValues() {
    }

    /** The value as text, or {@code dflt} when it is not set. */
    public static String string(Map<String, ?> configs, String key, String dflt) {
        Object v = configs.get(key);
        return v == null ? dflt : String.valueOf(v);
    }

    /** {@code true} or {@code false} exactly: Boolean.parseBoolean would take a typo for false. */
    public static boolean bool(Map<String, ?> configs, String key, boolean dflt) {
        String v = string(configs, key, String.valueOf(dflt)).strip();
        if (!v.equalsIgnoreCase("true") && !v.equalsIgnoreCase("false")) {
            throw new IllegalArgumentException(key + " must be true or false, got '" + v + "'");
        }
        return Boolean.parseBoolean(v);
    }

    /** An integer within {@code min..max}, or {@code dflt} when it is not set. */
    public static long bounded(Map<String, ?> configs, String key, long dflt, long min, long max) {
        Object v = configs.get(key);
        long n;
        if (v == null) {
            n = dflt;
        } else if (v instanceof Integer || v instanceof Long || v instanceof Short || v instanceof Byte) {
            n = ((Number) v).longValue();
        } else {
            String text = String.valueOf(v).strip();
            // A long number is refused by its length before parsing: configs are outside input too.
            if (text.length() > 20) {
                throw new IllegalArgumentException(key + " must be an integer, got " + text.length() + " characters");
            }
            try {
                n = Long.parseLong(text);
            } catch (NumberFormatException e) {
                throw new IllegalArgumentException(key + " must be an integer, got '" + v + "'", e);
            }
        }
        if (n < min || n > max) {
            throw new IllegalArgumentException(key + " must be in " + min + ".." + max + ", got " + n);
        }
        return n;
    }

    /** The entries whose key starts with {@code prefix}, the prefix removed (e.g. client overrides). */
    public static Map<String, Object> underPrefix(Map<String, ?> configs, String prefix) {
        Map<String, Object> props = new TreeMap<>();
        for (Map.Entry<String, ?> e : configs.entrySet()) {
            if (e.getKey().startsWith(prefix) && e.getValue() != null) {
                props.put(e.getKey().substring(prefix.length()), e.getValue());
            }
        }
        return props;
    }
}
