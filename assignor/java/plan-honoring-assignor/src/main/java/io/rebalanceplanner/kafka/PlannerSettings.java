package io.rebalanceplanner.kafka;

import static io.rebalanceplanner.core.ConfigValues.bool;
import static io.rebalanceplanner.core.ConfigValues.bounded;
import static io.rebalanceplanner.core.ConfigValues.string;
import static io.rebalanceplanner.core.ConfigValues.underPrefix;

import io.rebalanceplanner.core.Deferral;
import io.rebalanceplanner.core.PlanVerifier;
import java.security.PublicKey;
import java.util.Map;
import java.util.TreeMap;

/** The plugin's settings, read from the map Kafka Streams hands to {@code TaskAssignor.configure}. */
public final class PlannerSettings {
    public static final String PREFIX = "rebalance.planner.";
    public static final String VERIFY_KEYS = PREFIX + "verify.keys";
    public static final String PLANS_TOPIC = PREFIX + "plans.topic";
    public static final String REPORTS_TOPIC = PREFIX + "reports.topic";
    public static final String PLAN_READ_TIMEOUT_MS = PREFIX + "plan.read.timeout.ms";
    public static final String CLOCK_SKEW_MS = PREFIX + "clock.skew.ms";
    public static final String REPORTS_ENABLED = PREFIX + "reports.enabled";
    public static final String REPORTS_TIMEOUT_MS = PREFIX + "reports.timeout.ms";
    public static final String PLAN_CHECK_INTERVAL_MS = PREFIX + "plan.check.interval.ms";
    public static final String OFFSETS_TIMEOUT_MS = PREFIX + "offsets.timeout.ms";
    public static final String SCHEDULED_REBALANCE_MAX_DELAY_MS = PREFIX + "scheduled.rebalance.max.delay.ms";
    public static final String HOLD_WITHOUT_CAUGHT_UP_COPY = PREFIX + "hold.without.caught.up.copy";
    public static final String CLIENT_PREFIX = PREFIX + "client.";
    /** How soon records loaded by a restore still under way are published (0: only when a restore ends). */
    public static final String RESTORED_PUBLISH_INTERVAL_MS = PREFIX + "restored.publish.interval.ms";
    /** A directory of this instance's own (e.g. under Streams' state.dir) where the plan sequence floor is kept. */
    public static final String STATE_DIR = PREFIX + "state.dir";

    private final String applicationId;
    private final Map<String, PublicKey> verifyKeys;
    private final String plansTopic;
    private final String reportsTopic;
    private final long planReadTimeoutMs;
    private final long clockSkewMs;
    private final boolean reportsEnabled;
    private final long reportsTimeoutMs;
    private final long planCheckIntervalMs;
    private final long offsetsTimeoutMs;
    private final long restoredPublishIntervalMs;
    private final Deferral.Settings deferral;
    private final Map<String, Object> clientProperties;
    private final java.nio.file.Path stateDir;

    private PlannerSettings(Map<String, ?> configs) {
        Object appId = configs.get("application.id");
        if (appId == null || String.valueOf(appId).isEmpty()) {
            throw new IllegalArgumentException("application.id is not set");
        }
        applicationId = String.valueOf(appId);
        verifyKeys = PlanVerifier.parseKeys(string(configs, VERIFY_KEYS, ""));
        plansTopic = string(configs, PLANS_TOPIC, "_rebalance_plans");
        reportsTopic = string(configs, REPORTS_TOPIC, "_rebalance_reports");
        planReadTimeoutMs = bounded(configs, PLAN_READ_TIMEOUT_MS, 5000, 1, Long.MAX_VALUE);
        clockSkewMs = bounded(configs, CLOCK_SKEW_MS, 60000, 0, Long.MAX_VALUE);
        reportsEnabled = Boolean.parseBoolean(string(configs, REPORTS_ENABLED, "true").strip());
        reportsTimeoutMs = bounded(configs, REPORTS_TIMEOUT_MS, 2000, 0, Long.MAX_VALUE);
        planCheckIntervalMs = bounded(configs, PLAN_CHECK_INTERVAL_MS, 300_000, 0, Long.MAX_VALUE);
        offsetsTimeoutMs = bounded(configs, OFFSETS_TIMEOUT_MS, 2000, 0, Long.MAX_VALUE);
        restoredPublishIntervalMs = bounded(configs, RESTORED_PUBLISH_INTERVAL_MS, 10_000, 0, 86_400_000);
        deferral = new Deferral.Settings(bounded(configs, SCHEDULED_REBALANCE_MAX_DELAY_MS, 0, 0, Long.MAX_VALUE),
                bool(configs, HOLD_WITHOUT_CAUGHT_UP_COPY, false));
        clientProperties = clientProperties(configs);
        String dir = string(configs, STATE_DIR, "").strip();
        stateDir = dir.isEmpty() ? null : java.nio.file.Paths.get(dir);
    }

    /** Where the plan sequence floor is kept across restarts, or null (then only the plans topic holds it). */
    public java.nio.file.Path stateDir() {
        return stateDir;
    }

    /** @throws IllegalArgumentException naming the bad setting */
    public static PlannerSettings from(Map<String, ?> configs) {
        return new PlannerSettings(configs);
    }

    /**
     * Connection settings come from the Streams config so that a secured cluster needs no second copy;
     * {@code rebalance.planner.client.*} overrides them (e.g. a principal allowed to read the plans topic).
     */
    static Map<String, Object> clientProperties(Map<String, ?> configs) {
        Map<String, Object> props = new TreeMap<>();
        for (Map.Entry<String, ?> e : configs.entrySet()) {
            String key = e.getKey();
            if (e.getValue() == null) {
                continue;
            }
            if (key.equals("bootstrap.servers") || key.equals("security.protocol") || key.equals("client.dns.lookup")
                    || key.startsWith("sasl.") || key.startsWith("ssl.")) {
                props.put(key, e.getValue());
            }
        }
        props.putAll(underPrefix(configs, CLIENT_PREFIX));
        return props;
    }

    public String applicationId() {
        return applicationId;
    }

    public Map<String, PublicKey> verifyKeys() {
        return verifyKeys;
    }

    public String plansTopic() {
        return plansTopic;
    }

    public String reportsTopic() {
        return reportsTopic;
    }

    public long planReadTimeoutMs() {
        return planReadTimeoutMs;
    }

    public long clockSkewMs() {
        return clockSkewMs;
    }

    public boolean reportsEnabled() {
        return reportsEnabled;
    }

    public long reportsTimeoutMs() {
        return reportsTimeoutMs;
    }

    /**
     * How long a settled group goes without a rebalance, so that a plan published meanwhile is read (plans are
     * read only while the group rebalances); 0 means only rebalances Kafka starts anyway.
     */
    public long planCheckIntervalMs() {
        return planCheckIntervalMs;
    }

    /** Deadline for listing changelog end offsets (the reports' offset sums); 0 reports lags only. */
    public long offsetsTimeoutMs() {
        return offsetsTimeoutMs;
    }

    /**
     * How soon the restore listener publishes records loaded by a restore still under way (a hot standby's loading
     * never ends); 0: only when a changelog partition's restore ends or is suspended.
     */
    public long restoredPublishIntervalMs() {
        return restoredPublishIntervalMs;
    }

    /**
     * Deferred resolution: how long a departed member's place is kept (0, the default: not at all, as Kafka
     * Streams) and whether its tasks with no caught-up copy elsewhere wait for it unprocessed.
     */
    public Deferral.Settings deferral() {
        return deferral;
    }

    /** Kafka client properties for the plugin's own consumer and producer. */
    public Map<String, Object> clientProperties() {
        return clientProperties;
    }
}
