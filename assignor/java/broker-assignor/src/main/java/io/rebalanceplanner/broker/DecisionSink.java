package io.rebalanceplanner.broker;

/** Where decisions go; {@link #offer} never blocks and never does I/O (it runs on the coordinator thread). */
interface DecisionSink {
    /** Returns false when the decision was dropped (queue full). */
    boolean offer(Decision decision);
}
