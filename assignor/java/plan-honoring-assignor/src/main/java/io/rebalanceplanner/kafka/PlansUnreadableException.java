package io.rebalanceplanner.kafka;

/** The plans topic could not be read to its end in time: the group must not act on a possibly stale plan. */
public final class PlansUnreadableException extends Exception {
    private static final long serialVersionUID = 1L;

    public PlansUnreadableException(String message, Throwable cause) {
        super(message, cause);
    }
}
