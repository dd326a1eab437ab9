package io.rebalanceplanner.broker;

import static io.rebalanceplanner.core.ConfigValues.bool;
import static io.rebalanceplanner.core.ConfigValues.bounded;
import static io.rebalanceplanner.core.ConfigValues.string;
import static io.rebalanceplanner.core.ConfigValues.underPrefix;

import io.rebalanceplanner.core.PlanVerifier;
import java.security.PublicKey;
import java.util.Map;

/**
 * The assignor's settings, read from the broker's own configuration ({@code server.properties}): the 4.4 broker
 * hands every {@code Configurable} streams assignor {@code AbstractConfig.originals()}, so our keys sit beside the
 * broker's under the {@code rebalance.planner.} prefix. Parsing has no side effects (the broker builds its config,
 * and so our assignor, about a dozen times at startup).
 */
public final class BrokerAssignorSettings {
    public static final String PREFIX = "rebalance.planner.";
    public static final String VERIFY_KEYS = PREFIX + "verify.keys";
    public static final String PLANS_TOPIC = PREFIX + "plans.topic";
    public static final String DECISIONS_TOPIC = PREFIX + "decisions.topic";
    public static final String DECISIONS_ENABLED = PREFIX + "decisions.enabled";
    public static final String CLOCK_SKEW_MS = PREFIX + "clock.skew.ms";
    public static final String MAX_PLANS = PREFIX + "max.plans";
    public static final String GROUP_TAG = PREFIX + "group.tag";
    public static final String POLL_MS = PREFIX + "poll.ms";
    public static final String CLIENT_PREFIX = PREFIX + "client.";

    static final long MAX_CLOCK_SKEW_MS = 24L * 3600 * 1000;
    static final long MAX_MAX_PLANS = 1_000_000;
    static final long MAX_POLL_MS = 60_000;

    private final Map<String, PublicKey> verifyKeys;
    private final String plansTopic;
    private final String decisionsTopic;
    private final boolean decisionsEnabled;
    private final long clockSkewMs;
    private final int maxPlans;
    private final String groupTag;
    private final long pollMs;
    private final Map<String, Object> clientProperties;

    private BrokerAssignorSettings(Map<String, ?> configs) {
        try {
            verifyKeys = PlanVerifier.parseKeys(string(configs, VERIFY_KEYS, ""));
        } catch (IllegalArgumentException e) {
            throw new IllegalArgumentException(VERIFY_KEYS + ": " + e.getMessage(), e);
        }
        plansTopic = nonEmpty(configs, PLANS_TOPIC, "_rebalance_plans");
        decisionsTopic = nonEmpty(configs, DECISIONS_TOPIC, "_rebalance_assignor_decisions");
        decisionsEnabled = bool(configs, DECISIONS_ENABLED, true);
        clockSkewMs = bounded(configs, CLOCK_SKEW_MS, 60_000, 0, MAX_CLOCK_SKEW_MS);
        maxPlans = (int) bounded(configs, MAX_PLANS, 10_000, 1, MAX_MAX_PLANS);
        groupTag = string(configs, GROUP_TAG, "rebalance.planner.group").strip();
        pollMs = bounded(configs, POLL_MS, 1000, 10, MAX_POLL_MS);
        clientProperties = clientProperties(configs);
    }

    /** @throws IllegalArgumentException naming the bad setting */
    public static BrokerAssignorSettings from(Map<String, ?> configs) {
        return new BrokerAssignorSettings(configs);
    }

    /**
     * Only {@code rebalance.planner.client.*}: the broker's own {@code listeners}/{@code ssl.*} are for serving, not
     * for connecting, so the assignor's consumer and producer are configured explicitly (bootstrap, a principal
     * allowed to read the plans topic).
     */
    static Map<String, Object> clientProperties(Map<String, ?> configs) {
        return underPrefix(configs, CLIENT_PREFIX);
    }

    private static String nonEmpty(Map<String, ?> configs, String key, String dflt) {
        String v = string(configs, key, dflt).strip();
        if (v.isEmpty() || v.length() > 249) {
            throw new IllegalArgumentException(key + " must be a topic name of 1..249 characters, got '" + v + "'");
        }
        return v;
    }

    public Map<String, PublicKey> verifyKeys() {
        return verifyKeys;
    }

    public String plansTopic() {
        return plansTopic;
    }

    public String decisionsTopic() {
        return decisionsTopic;
    }

    public boolean decisionsEnabled() {
        return decisionsEnabled;
    }

    public long clockSkewMs() {
        return clockSkewMs;
    }

    /** How many groups the cache remembers (plans and withdrawals); records for further groups are refused. */
    public int maxPlans() {
        return maxPlans;
    }

    /** The client tag whose value names a member's group id (empty: match by process ids only). */
    public String groupTag() {
        return groupTag;
    }

    /** How long the background reader polls the plans topic at a time. */
    public long pollMs() {
        return pollMs;
    }

    /** Kafka client properties for the background consumer and producer. */
    public Map<String, Object> clientProperties() {
        return clientProperties;
    }

    /** Identity of a configuration: instances configured alike share one cache. */
    String identity() {
        StringBuilder keys = new StringBuilder();
        verifyKeys.forEach((id, key) -> keys.append(id).append('=').append(PlanVerifier.toHex(key.getEncoded()))
                .append(','));
        return keys + "\u0000" + plansTopic + "\u0000" + decisionsTopic + "\u0000" + decisionsEnabled
                + "\u0000" + clockSkewMs + "\u0000" + maxPlans + "\u0000" + pollMs + "\u0000" + clientProperties;
    }
}
