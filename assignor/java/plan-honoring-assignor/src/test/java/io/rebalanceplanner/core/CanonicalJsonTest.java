package io.rebalanceplanner.core;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * Canonical bytes against Python's {@code json.dumps(v, sort_keys=True, separators=(",", ":"),
 * ensure_ascii=False).encode("utf-8")}; the expected hex strings were produced by CPython 3.
 */
class CanonicalJsonTest {
    private static String hexOf(Object value) {
        return PlanVerifier.toHex(CanonicalJson.bytes(value));
    }

    @Test
    void controlCharactersAndDelete() {
        assertEquals("225c75303030305c75303030315c625c745c6e5c75303030625c665c725c75303031667f22",
                hexOf("\u0000\u0001\b\t\n\u000b\f\r\u001f\u007f"));
    }

    @Test
    void onlyQuoteAndBackslashEscapedNotSlash() {
        assertEquals("22615c22625c5c632f6422", hexOf("a\"b\\c/d"));
    }

    @Test
    void lineSeparatorsAndLatinStayRaw() {
        assertEquals("22e280a8e280a9c285c3a922", hexOf("\u2028\u2029\u0085\u00e9"));
    }

    @Test
    void astralCharactersRawInUtf8() {
        assertEquals("22f09f988078f090808022", hexOf("\uD83D\uDE00x\uD800\uDC00"));
    }

    @Test
    void keysSortedByCodePointNotUtf16() {
        Map<String, Object> inner = new LinkedHashMap<>();
        inner.put("b", "x");
        inner.put("a", Map.of());
        Map<String, Object> obj = new LinkedHashMap<>();
        obj.put("\uD83D\uDE00", 2L);
        obj.put("\uff01", 1L);
        obj.put("a", Arrays.asList(true, false, null, 0L, Long.MAX_VALUE, Long.MIN_VALUE));
        obj.put("", inner);
        obj.put("\u00e9", java.util.List.of());
        assertEquals("{\"\":{\"a\":{},\"b\":\"x\"},\"a\":[true,false,null,0,9223372036854775807,"
                + "-9223372036854775808],\"\u00e9\":[],\"\uff01\":1,\"\uD83D\uDE00\":2}", CanonicalJson.string(obj));
        assertEquals("7b22223a7b2261223a7b7d2c2262223a2278227d2c2261223a5b747275652c66616c73652c6e756c6c2c302c3932"
                + "32333337323033363835343737353830372c2d393232333337323033363835343737353830385d2c22c3a9223a5b5d2c"
                + "22efbc81223a312c22f09f9880223a327d", hexOf(obj));
    }

    @Test
    void roundTripThroughTheStrictParser() throws JsonException {
        String text = "{ \"z\" : [1, -0, \"\\u00e9\\ud83d\\ude00\\/\"], \"a\": {\"\\uff01\": null} }";
        Object parsed = StrictJson.parse(text.getBytes(StandardCharsets.UTF_8));
        assertEquals("{\"a\":{\"\uff01\":null},\"z\":[1,0,\"\u00e9\uD83D\uDE00/\"]}", CanonicalJson.string(parsed));
    }

    @Test
    void floatsHaveNoCanonicalForm() {
        assertThrows(IllegalArgumentException.class, () -> CanonicalJson.bytes(1.5));
    }

    @Test
    void strictParserRejections() {
        String[] bad = {
            "{\"a\":1.0}", "{\"a\":1e3}", "{\"a\":NaN}", "{\"a\":Infinity}", "{\"a\":-Infinity}",
            "{\"a\":9223372036854775808}", "{\"a\":\"\\ud800\"}", "{\"a\":\"\\udc00x\"}", "{\"a\":1,\"a\":2}",
            "{\"a\":01}", "{\"a\":1} x", "\uFEFF{}", "{\"a\":\"\u0001\"}", "[1,]", "{\"a\":tru}", "",
        };
        for (String s : bad) {
            assertThrows(JsonException.class, () -> StrictJson.parse(s.getBytes(StandardCharsets.UTF_8)), s);
        }
        byte[][] badBytes = {
            {'"', (byte) 0xc0, (byte) 0x80, '"'}, {'"', (byte) 0xed, (byte) 0xa0, (byte) 0x80, '"'},
            {'"', (byte) 0xe2, (byte) 0x82, '"'}, {'"', (byte) 0xff, '"'},
        };
        for (byte[] b : badBytes) {
            assertThrows(JsonException.class, () -> StrictJson.parse(b), PlanVerifier.toHex(b));
        }
    }

    @Test
    void depthCountedOnBytesOutsideStrings() throws JsonException {
        String ok = "[".repeat(32) + "\"[[[{{{\\\"[\"" + "]".repeat(32);
        StrictJson.parse(ok.getBytes(StandardCharsets.UTF_8));
        String deep = "[".repeat(33) + "]".repeat(33);
        assertThrows(JsonException.class, () -> StrictJson.parse(deep.getBytes(StandardCharsets.UTF_8)));
        assertEquals(1, StrictJson.nestingDepth("{}".getBytes(StandardCharsets.UTF_8)));
    }
}
