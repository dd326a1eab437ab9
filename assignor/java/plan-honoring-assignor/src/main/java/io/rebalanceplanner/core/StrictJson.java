package io.rebalanceplanner.core;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * A JSON reader that accepts only what both the Python and the Java side can represent the same way.
 *
 * <p>Values are {@code Map<String, Object>} (insertion-ordered), {@code List<Object>}, {@code String},
 * {@code Long}, {@code Boolean} and {@code null}. Anything a Python {@code json.loads} would read differently
 * from us (floats, big integers, lone surrogates, duplicate keys) is refused, so that re-serializing a parsed
 * value gives the bytes the signer saw.
 */
public final class StrictJson {
    public static final int MAX_BYTES = 1024 * 1024;
    public static final int MAX_DEPTH = 32;

    private final String text;
    private int pos;

    private StrictJson(String text) {
        this.text = text;
    }

    /** Parse a plan-sized record: the size and depth limits are checked on the raw bytes first. */
    public static Object parse(byte[] bytes) throws JsonException {
        return parse(bytes, MAX_BYTES, MAX_DEPTH);
    }

    public static Object parse(byte[] bytes, int maxBytes, int maxDepth) throws JsonException {
        if (bytes.length > maxBytes) {
            throw new JsonException("larger than " + maxBytes + " bytes (" + bytes.length + ")");
        }
        int depth = nestingDepth(bytes);
        if (depth > maxDepth) {
            throw new JsonException("nested " + depth + " levels deep, more than " + maxDepth);
        }
        String text = Utf8.decodeStrict(bytes);
        if (!text.isEmpty() && text.charAt(0) == '\uFEFF') {
            throw new JsonException("starts with a byte order mark");
        }
        StrictJson reader = new StrictJson(text);
        reader.skipWhitespace();
        Object value = reader.readValue();
        reader.skipWhitespace();
        if (reader.pos != text.length()) {
            throw reader.error("extra data after the JSON value");
        }
        return value;
    }

    /**
     * The deepest nesting of arrays and objects, counted on the bytes so that a hostile record cannot make
     * the parser recurse before it is refused. Brackets inside strings do not count.
     */
    public static int nestingDepth(byte[] bytes) {
        int depth = 0;
        int max = 0;
        boolean inString = false;
        for (int i = 0; i < bytes.length; i++) {
            byte b = bytes[i];
            if (inString) {
                if (b == '\\') {
                    i++;
                } else if (b == '"') {
                    inString = false;
                }
            } else if (b == '"') {
                inString = true;
            } else if (b == '[' || b == '{') {
                depth++;
                max = Math.max(max, depth);
            } else if (b == ']' || b == '}') {
                depth--;
            }
        }
        return max;
    }

    private JsonException error(String what) {
        return new JsonException(what + " at character " + pos);
    }

    private void skipWhitespace() {
        while (pos < text.length()) {
            char c = text.charAt(pos);
            if (c != ' ' && c != '\t' && c != '\n' && c != '\r') {
                return;
            }
            pos++;
        }
    }

    private Object readValue() throws JsonException {
        if (pos >= text.length()) {
            throw error("unexpected end of input");
        }
        char c = text.charAt(pos);
        switch (c) {
            case '{':
                return readObject();
            case '[':
                return readArray();
            case '"':
                return readString();
            case 't':
                expectWord("true");
                return Boolean.TRUE;
            case 'f':
                expectWord("false");
                return Boolean.FALSE;
            case 'n':
                expectWord("null");
                return null;
            default:
                if (c == '-' || (c >= '0' && c <= '9')) {
                    return readNumber();
                }
                throw error("unexpected character " + describe(c));
        }
    }

    private static String describe(char c) {
        return c >= 0x20 && c < 0x7f ? "'" + c + "'" : String.format("U+%04X", (int) c);
    }

    private void expectWord(String word) throws JsonException {
        if (!text.startsWith(word, pos)) {
            throw error("unexpected literal");
        }
        pos += word.length();
    }

    private Map<String, Object> readObject() throws JsonException {
        pos++;
        Map<String, Object> object = new LinkedHashMap<>();
        skipWhitespace();
        if (pos < text.length() && text.charAt(pos) == '}') {
            pos++;
            return object;
        }
        while (true) {
            skipWhitespace();
            if (pos >= text.length() || text.charAt(pos) != '"') {
                throw error("expected a string key");
            }
            String key = readString();
            skipWhitespace();
            if (pos >= text.length() || text.charAt(pos) != ':') {
                throw error("expected ':'");
            }
            pos++;
            skipWhitespace();
            Object value = readValue();
            if (object.containsKey(key)) {
                throw error("duplicate key \"" + key + "\"");
            }
            object.put(key, value);
            skipWhitespace();
            if (pos >= text.length()) {
                throw error("unterminated object");
            }
            char c = text.charAt(pos++);
            if (c == '}') {
                return object;
            }
            if (c != ',') {
                throw error("expected ',' or '}'");
            }
        }
    }

    private List<Object> readArray() throws JsonException {
        pos++;
        List<Object> array = new ArrayList<>();
        skipWhitespace();
        if (pos < text.length() && text.charAt(pos) == ']') {
            pos++;
            return Collections.unmodifiableList(array);
        }
        while (true) {
            skipWhitespace();
            array.add(readValue());
            skipWhitespace();
            if (pos >= text.length()) {
                throw error("unterminated array");
            }
            char c = text.charAt(pos++);
            if (c == ']') {
                return Collections.unmodifiableList(array);
            }
            if (c != ',') {
                throw error("expected ',' or ']'");
            }
        }
    }

    private Long readNumber() throws JsonException {
        int start = pos;
        if (text.charAt(pos) == '-') {
            pos++;
        }
        int digitsStart = pos;
        while (pos < text.length() && text.charAt(pos) >= '0' && text.charAt(pos) <= '9') {
            pos++;
        }
        int digits = pos - digitsStart;
        if (digits == 0) {
            // "-Infinity" lands here too: Python would read it as a float, which we never accept.
            throw error("not a number");
        }
        if (digits > 1 && text.charAt(digitsStart) == '0') {
            throw error("number with a leading zero");
        }
        if (pos < text.length()) {
            char c = text.charAt(pos);
            if (c == '.' || c == 'e' || c == 'E') {
                throw error("number with a fraction or exponent");
            }
        }
        if (digits > 19) {
            // An int64 has at most 19 digits: refuse a longer number before copying or converting it.
            throw error("integer outside the signed 64-bit range");
        }
        try {
            return Long.parseLong(text.substring(start, pos));
        } catch (NumberFormatException e) {
            throw error("integer outside the signed 64-bit range");
        }
    }

    private String readString() throws JsonException {
        pos++;
        StringBuilder out = new StringBuilder();
        while (true) {
            if (pos >= text.length()) {
                throw error("unterminated string");
            }
            char c = text.charAt(pos++);
            if (c == '"') {
                break;
            }
            if (c < 0x20) {
                throw error("control character in a string");
            }
            if (c != '\\') {
                out.append(c);
                continue;
            }
            if (pos >= text.length()) {
                throw error("unterminated escape");
            }
            char e = text.charAt(pos++);
            switch (e) {
                case '"':
                case '\\':
                case '/':
                    out.append(e);
                    break;
                case 'b':
                    out.append('\b');
                    break;
                case 'f':
                    out.append('\f');
                    break;
                case 'n':
                    out.append('\n');
                    break;
                case 'r':
                    out.append('\r');
                    break;
                case 't':
                    out.append('\t');
                    break;
                case 'u':
                    out.append(readHex4());
                    break;
                default:
                    throw error("invalid escape");
            }
        }
        String s = out.toString();
        // Raw text comes from strict UTF-8 and holds no lone surrogates; only \\u escapes can create one.
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            if (Character.isHighSurrogate(c)) {
                if (i + 1 < s.length() && Character.isLowSurrogate(s.charAt(i + 1))) {
                    i++;
                    continue;
                }
                throw error("string holds a lone surrogate");
            }
            if (Character.isLowSurrogate(c)) {
                throw error("string holds a lone surrogate");
            }
        }
        return s;
    }

    private char readHex4() throws JsonException {
        if (pos + 4 > text.length()) {
            throw error("truncated \\u escape");
        }
        int value = 0;
        for (int k = 0; k < 4; k++) {
            int d = Character.digit(text.charAt(pos + k), 16);
            if (d < 0 || text.charAt(pos + k) > 'f') {
                throw error("invalid \\u escape");
            }
            value = value * 16 + d;
        }
        pos += 4;
        return (char) value;
    }

    /** Strict UTF-8 decoding, as Python's {@code bytes.decode("utf-8")}: no overlongs, no surrogates. */
    static final class Utf8 {
        private Utf8() {}

        static String decodeStrict(byte[] bytes) throws JsonException {
            StringBuilder out = new StringBuilder(bytes.length);
            int i = 0;
            while (i < bytes.length) {
                int b0 = bytes[i] & 0xff;
                if (b0 < 0x80) {
                    out.append((char) b0);
                    i++;
                    continue;
                }
                int need;
                int cp;
                int min;
                if (b0 >= 0xc2 && b0 <= 0xdf) {
                    need = 1;
                    cp = b0 & 0x1f;
                    min = 0x80;
                } else if (b0 >= 0xe0 && b0 <= 0xef) {
                    need = 2;
                    cp = b0 & 0x0f;
                    min = 0x800;
                } else if (b0 >= 0xf0 && b0 <= 0xf4) {
                    need = 3;
                    cp = b0 & 0x07;
                    min = 0x10000;
                } else {
                    throw new JsonException("not UTF-8: invalid byte 0x" + Integer.toHexString(b0) + " at " + i);
                }
                if (i + need >= bytes.length) {
                    throw new JsonException("not UTF-8: truncated sequence at " + i);
                }
                for (int k = 1; k <= need; k++) {
                    int b = bytes[i + k] & 0xff;
                    if ((b & 0xc0) != 0x80) {
                        throw new JsonException("not UTF-8: invalid continuation at " + (i + k));
                    }
                    cp = (cp << 6) | (b & 0x3f);
                }
                if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) {
                    throw new JsonException("not UTF-8: invalid sequence at " + i);
                }
                out.appendCodePoint(cp);
                i += need + 1;
            }
            return out.toString();
        }

        static byte[] encode(String s) {
            return s.getBytes(StandardCharsets.UTF_8);
        }
    }
}
