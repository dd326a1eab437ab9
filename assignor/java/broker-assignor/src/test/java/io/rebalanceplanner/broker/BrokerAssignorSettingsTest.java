package io.rebalanceplanner.broker;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Map;
import org.junit.jupiter.api.Test;

class BrokerAssignorSettingsTest {
    @Test
    void defaultsNeedNoSettingsAtAll() {
        BrokerAssignorSettings s = BrokerAssignorSettings.from(Map.of("node.id", "1", "listeners", "PLAINTEXT://:9092"));
        assertEquals("_rebalance_plans", s.plansTopic());
        assertEquals("_rebalance_assignor_decisions", s.decisionsTopic());
        assertEquals(10_000, s.maxPlans());
        assertEquals("rebalance.planner.group", s.groupTag());
        assertTrue(s.verifyKeys().isEmpty());
        assertTrue(s.clientProperties().isEmpty(), "the broker's own settings are not client settings");
    }

    @Test
    void clientSettingsComeOnlyFromTheirPrefix() {
        BrokerAssignorSettings s = BrokerAssignorSettings.from(Map.of(
                "rebalance.planner.client.bootstrap.servers", "localhost:9092",
                "rebalance.planner.client.security.protocol", "SASL_SSL", "bootstrap.servers", "ignored:1"));
        assertEquals(Map.of("bootstrap.servers", "localhost:9092", "security.protocol", "SASL_SSL"),
                s.clientProperties());
    }

    @Test
    void outOfRangeValuesNameTheSetting() {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> BrokerAssignorSettings.from(Map.of(BrokerAssignorSettings.MAX_PLANS, "0")));
        assertTrue(e.getMessage().contains(BrokerAssignorSettings.MAX_PLANS), e.getMessage());
        e = assertThrows(IllegalArgumentException.class,
                () -> BrokerAssignorSettings.from(Map.of(BrokerAssignorSettings.CLOCK_SKEW_MS, "99999999999999999999")));
        assertTrue(e.getMessage().contains(BrokerAssignorSettings.CLOCK_SKEW_MS), e.getMessage());
        e = assertThrows(IllegalArgumentException.class,
                () -> BrokerAssignorSettings.from(Map.of(BrokerAssignorSettings.DECISIONS_ENABLED, "yes")));
        assertTrue(e.getMessage().contains(BrokerAssignorSettings.DECISIONS_ENABLED), e.getMessage());
    }

    @Test
    void sameSettingsShareOneIdentity() {
        Signer signer = new Signer();
        Map<String, String> c = Map.of(BrokerAssignorSettings.VERIFY_KEYS, signer.verifyKeysSetting());
        assertEquals(BrokerAssignorSettings.from(c).identity(), BrokerAssignorSettings.from(c).identity());
        assertEquals(1, BrokerAssignorSettings.from(c).verifyKeys().size());
    }
}
