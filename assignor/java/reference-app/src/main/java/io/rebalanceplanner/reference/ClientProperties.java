package io.rebalanceplanner.reference;

import java.io.IOException;
import java.io.InputStream;
import java.io.StringReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;

/**
 * {@code --client-properties FILE}: Kafka client settings every client of the app uses (Streams and, through it, the
 * plugin and the restore listener; the topic admin; the producer), e.g. SASL_SSL with its own SCRAM login. Only
 * connection settings are taken, so the file cannot change what the app computes or how it is assigned.
 */
final class ClientProperties {
    static final String FLAG = "client-properties";
    /** Settings of how a client reaches and authenticates to the cluster (the plugin copies the same ones). */
    private static final String[] EXACT = {"security.protocol", "client.dns.lookup"};
    private static final String[] PREFIXES = {"sasl.", "ssl."};
    /** A properties file larger than this is not a client configuration. */
    static final long MAX_BYTES = 64 * 1024;

    private ClientProperties() {}

    /** The file's settings, or none without the flag; IllegalArgumentException naming the file and what is wrong. */
    static Map<String, Object> from(Flags flags) {
        if (!flags.has(FLAG)) {
            return Map.of();
        }
        return read(Path.of(flags.get(FLAG, "")));
    }

    static Map<String, Object> read(Path file) {
        Properties loaded = new Properties();
        try {
            if (!Files.isRegularFile(file)) {
                throw new IllegalArgumentException("--client-properties " + file + ": cannot read it: not a file");
            }
            byte[] bytes;
            // Read no further than the bound: the size a file reports can be 0 (a pipe, /proc) or grow meanwhile.
            try (InputStream in = Files.newInputStream(file)) {
                bytes = in.readNBytes((int) MAX_BYTES + 1);
            }
            if (bytes.length > MAX_BYTES) {
                throw new IllegalArgumentException("--client-properties " + file + ": more than " + MAX_BYTES
                        + " bytes");
            }
            loaded.load(new StringReader(new String(bytes, StandardCharsets.UTF_8)));
        } catch (IOException e) {
            throw new IllegalArgumentException("--client-properties " + file + ": cannot read it: " + e.getMessage(),
                    e);
        }
        Map<String, Object> out = new TreeMap<>();
        for (String key : loaded.stringPropertyNames()) {
            if (!connection(key)) {
                throw new IllegalArgumentException("--client-properties " + file + ": " + key
                        + " is not a connection setting (security.protocol, client.dns.lookup, sasl.*, ssl.*; no *.class, no OAuth URL)");
            }
            out.put(key, loaded.getProperty(key));
        }
        return out;
    }

    private static boolean connection(String key) {
        // Settings that load a class or reach another server (an OAuth endpoint) are not a connection's settings.
        if (key.endsWith(".class") || (key.startsWith("sasl.oauthbearer.") && key.endsWith(".url"))) {
            return false;
        }
        for (String exact : EXACT) {
            if (key.equals(exact)) {
                return true;
            }
        }
        for (String prefix : PREFIXES) {
            if (key.startsWith(prefix)) {
                return true;
            }
        }
        return false;
    }
}
