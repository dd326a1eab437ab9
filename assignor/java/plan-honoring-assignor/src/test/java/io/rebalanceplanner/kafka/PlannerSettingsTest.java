package io.rebalanceplanner.kafka;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.rebalanceplanner.core.Deferral;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** The deferral settings: off by default, read from the Streams config, and a bad value named. */
class PlannerSettingsTest {
    @Test
    void deferralIsOffByDefault() {
        assertEquals(new Deferral.Settings(0, false), PlannerSettings.from(Map.of("application.id", "app")).deferral());
    }

    @Test
    void deferralSettingsAreRead() {
        PlannerSettings s = PlannerSettings.from(Map.of("application.id", "app",
                PlannerSettings.SCHEDULED_REBALANCE_MAX_DELAY_MS, "30000",
                PlannerSettings.HOLD_WITHOUT_CAUGHT_UP_COPY, " TRUE "));
        assertEquals(new Deferral.Settings(30_000, true), s.deferral());
    }

    @Test
    void aBadDeferralSettingIsNamed() {
        IllegalArgumentException typo = assertThrows(IllegalArgumentException.class, () -> PlannerSettings.from(
                Map.of("application.id", "app", PlannerSettings.HOLD_WITHOUT_CAUGHT_UP_COPY, "yes")));
        assertTrue(typo.getMessage().contains(PlannerSettings.HOLD_WITHOUT_CAUGHT_UP_COPY), typo.getMessage());
        IllegalArgumentException negative = assertThrows(IllegalArgumentException.class, () -> PlannerSettings.from(
                Map.of("application.id", "app", PlannerSettings.SCHEDULED_REBALANCE_MAX_DELAY_MS, "-1")));
        assertTrue(negative.getMessage().contains(PlannerSettings.SCHEDULED_REBALANCE_MAX_DELAY_MS),
                negative.getMessage());
    }

    @Test
    void theRestoredPublishIntervalDefaultsToTenSecondsAndIsBounded() {
        assertEquals(10_000, PlannerSettings.from(Map.of("application.id", "app")).restoredPublishIntervalMs());
        assertEquals(0, PlannerSettings.from(Map.of("application.id", "app",
                PlannerSettings.RESTORED_PUBLISH_INTERVAL_MS, "0")).restoredPublishIntervalMs());
        IllegalArgumentException tooLong = assertThrows(IllegalArgumentException.class, () -> PlannerSettings.from(
                Map.of("application.id", "app", PlannerSettings.RESTORED_PUBLISH_INTERVAL_MS, "86400001")));
        assertTrue(tooLong.getMessage().contains(PlannerSettings.RESTORED_PUBLISH_INTERVAL_MS), tooLong.getMessage());
    }
}
