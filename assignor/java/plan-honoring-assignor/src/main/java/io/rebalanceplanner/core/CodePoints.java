package io.rebalanceplanner.core;

import java.util.Comparator;

/** String order by Unicode code point, the order Python sorts str in. */
public final class CodePoints {
    /**
     * Java's natural String order compares UTF-16 code units, which puts astral characters (surrogate pairs)
     * before U+E000..U+FFFF; Python and the canonical JSON put them after.
     */
    public static final Comparator<String> ORDER = CodePoints::compare;

    private CodePoints() {}

    public static int compare(String a, String b) {
        int i = 0;
        int j = 0;
        while (i < a.length() && j < b.length()) {
            int ca = a.codePointAt(i);
            int cb = b.codePointAt(j);
            if (ca != cb) {
                return Integer.compare(ca, cb);
            }
            i += Character.charCount(ca);
            j += Character.charCount(cb);
        }
        return Integer.compare(a.length() - i, b.length() - j);
    }
}
