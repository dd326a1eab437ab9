package io.rebalanceplanner.kafka;

/** Changelog end offsets could not be listed; the message says why (it goes into the state reports). */
public class EndOffsetsUnavailableException extends Exception {
    private static final long serialVersionUID = 1L;

    public EndOffsetsUnavailableException(String message, Throwable cause) {
        super(message, cause);
    }
}
