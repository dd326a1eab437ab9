package io.rebalanceplanner.reference;

import java.util.HashMap;
import java.util.Map;

/** {@code --name value} and {@code --name=value} flags; a bare {@code --flag} means "true". */
final class Flags {
    private final Map<String, String> values = new HashMap<>();

    Flags(String[] args) {
        for (int i = 0; i < args.length; i++) {
            String a = args[i];
            if (!a.startsWith("--")) {
                throw new IllegalArgumentException("unexpected argument: " + a);
            }
            String name = a.substring(2);
            int eq = name.indexOf('=');
            if (eq >= 0) {
                values.put(name.substring(0, eq), name.substring(eq + 1));
            } else if (i + 1 < args.length && !args[i + 1].startsWith("--")) {
                values.put(name, args[++i]);
            } else {
                values.put(name, "true");
            }
        }
    }

    String get(String name, String dflt) {
        return values.getOrDefault(name, dflt);
    }

    int getInt(String name, int dflt) {
        return Integer.parseInt(get(name, String.valueOf(dflt)));
    }

    long getLong(String name, long dflt) {
        return Long.parseLong(get(name, String.valueOf(dflt)));
    }

    boolean getBool(String name, boolean dflt) {
        return Boolean.parseBoolean(get(name, String.valueOf(dflt)));
    }

    boolean has(String name) {
        return values.containsKey(name);
    }
}
