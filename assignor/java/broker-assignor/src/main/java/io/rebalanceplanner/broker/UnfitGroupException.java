package io.rebalanceplanner.broker;

/** The group cannot be honored at all (out of bounds, a topology our task ids cannot name); carries a reason code. */
final class UnfitGroupException extends Exception {
    private static final long serialVersionUID = 1L;

    private final String code;

    UnfitGroupException(String code, String detail) {
        super(detail);
        this.code = code;
    }

    String code() {
        return code;
    }
}
