package io.rebalanceplanner.core;

/** Bytes that are not the strict JSON this project exchanges (see schemas/vectors/README.md). */
public final class JsonException extends Exception {
    private static final long serialVersionUID = 1L;

    public JsonException(String message) {
        super(message);
    }
}
