package io.rebalanceplanner.reference;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** {@code --client-properties}: connection settings from a file, anything else refused by name. */
class ClientPropertiesTest {
    @TempDir
    Path dir;

    private Flags flags(Path file) {
        return new Flags(new String[] {"--client-properties", file.toString()});
    }

    @Test
    void saslSslSettingsAreTakenAsWritten() throws IOException {
        Path file = dir.resolve("client.properties");
        Files.writeString(file, String.join("\n",
                "security.protocol=SASL_SSL",
                "sasl.mechanism=SCRAM-SHA-512",
                "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
                        + "username=\"app\" password=\"p=w\";",
                "ssl.truststore.type=PEM",
                "ssl.truststore.location=/run/secrets/tls_ca"));
        Map<String, Object> props = ClientProperties.from(flags(file));
        assertEquals("SASL_SSL", props.get("security.protocol"));
        assertEquals("PEM", props.get("ssl.truststore.type"));
        assertTrue(props.get("sasl.jaas.config").toString().endsWith("password=\"p=w\";"));
        assertEquals(5, props.size());
    }

    @Test
    void withoutTheFlagNothingIsAdded() {
        assertEquals(Map.of(), ClientProperties.from(new Flags(new String[0])));
    }

    @Test
    void aSettingThatIsNotAboutTheConnectionIsRefusedByName() throws IOException {
        Path file = dir.resolve("client.properties");
        Files.writeString(file, "security.protocol=SASL_SSL\ntask.assignor.class=x.Y\n");
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> ClientProperties.from(flags(file)));
        assertTrue(e.getMessage().contains("task.assignor.class is not a connection setting"), e.getMessage());
    }

    @Test
    void aSettingThatLoadsAClassOrReachesAnotherServerIsRefused() throws IOException {
        for (String line : new String[] {"ssl.engine.factory.class=x.Y", "sasl.login.callback.handler.class=x.Y",
            "sasl.oauthbearer.token.endpoint.url=https://elsewhere"}) {
            Path file = dir.resolve("client.properties");
            Files.writeString(file, "security.protocol=SASL_SSL\n" + line + "\n");
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                    () -> ClientProperties.from(flags(file)));
            assertTrue(e.getMessage().contains(line.split("=")[0] + " is not a connection setting"), e.getMessage());
        }
    }

    @Test
    void aDirectoryIsNotAPropertiesFile() {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> ClientProperties.from(flags(dir)));
        assertTrue(e.getMessage().contains("not a file"), e.getMessage());
    }

    @Test
    void aMissingOrOversizedFileIsNamed() throws IOException {
        Path missing = dir.resolve("absent.properties");
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> ClientProperties.from(flags(missing)));
        assertTrue(e.getMessage().contains(missing + ": cannot read it"), e.getMessage());
        Path big = dir.resolve("big.properties");
        Files.writeString(big, "#" + "x".repeat((int) ClientProperties.MAX_BYTES));
        e = assertThrows(IllegalArgumentException.class, () -> ClientProperties.from(flags(big)));
        assertTrue(e.getMessage().contains("more than " + ClientProperties.MAX_BYTES), e.getMessage());
    }
}
