package io.rebalanceplanner.reference;

import java.util.Locale;

/** The rebalance protocol the app's group runs: Kafka Streams' {@code group.protocol}. */
enum GroupProtocol {
    /** The consumer group protocol with a client-side assignor (KIP-924 plugin possible). */
    CLASSIC("classic"),
    /** KIP-1071: the broker's group coordinator assigns tasks; standbys come from group configs. */
    STREAMS("streams");

    final String config;

    GroupProtocol(String config) {
        this.config = config;
    }

    static GroupProtocol parse(String value) {
        for (GroupProtocol p : values()) {
            if (p.config.equals(value.toLowerCase(Locale.ROOT))) {
                return p;
            }
        }
        throw new IllegalArgumentException("--group-protocol must be classic or streams, not: " + value);
    }
}
