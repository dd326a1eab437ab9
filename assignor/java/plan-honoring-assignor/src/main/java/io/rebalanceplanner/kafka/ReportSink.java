package io.rebalanceplanner.kafka;

import java.util.Map;

/** Where state reports go (the reports topic; a list in tests). Must never throw. */
public interface ReportSink {
    /** Key to JSON value; returns after at most the configured wait, whatever happened. */
    void publish(Map<String, byte[]> records);
}
