package io.rebalanceplanner.kafka;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.AtomicMoveNotSupportedException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.util.Set;
import java.util.TreeSet;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The plan-signing key ids a verified revocation took back, kept in {@code rebalance.planner.state.dir} like the
 * sequence floor: a revocation read once is not forgotten when the plans topic loses it. One key id a line.
 */
public final class RevokedKeysFile {
    private static final Logger LOG = LoggerFactory.getLogger(RevokedKeysFile.class);
    /** At most this many ids are kept, so that what keep writes stays within what read accepts. */
    static final int MAX_KEYS = 1024;
    private static final int MAX_BYTES = MAX_KEYS * 66; // a 64-character key id and its newline each, and slack
    private static final String KEY_ID = "[A-Za-z0-9._-]{1,64}";

    private final Path file;

    private RevokedKeysFile(Path file) {
        this.file = file;
    }

    /** The file in the settings' state dir, or null when no state dir is set (revocations then live in memory). */
    public static RevokedKeysFile of(PlannerSettings settings) {
        return settings.stateDir() == null ? null
                : new RevokedKeysFile(settings.stateDir().resolve("rebalance-planner-revoked-keys"));
    }

    /** The key ids kept; a damaged file is an error naming it (never silently forgotten). */
    public Set<String> read() throws PlansUnreadableException {
        try {
            if (!Files.exists(file)) {
                return Set.of();
            }
            if (Files.size(file) > MAX_BYTES) {
                throw new IOException(file + " is larger than " + MAX_BYTES + " bytes: not a revoked-keys file");
            }
            Set<String> ids = new TreeSet<>();
            for (String line : Files.readAllLines(file, StandardCharsets.US_ASCII)) {
                String id = line.strip();
                if (id.isEmpty()) {
                    continue;
                }
                if (!id.matches(KEY_ID)) {
                    throw new IOException(file + " holds '" + id.substring(0, Math.min(id.length(), 70))
                            + "', not a key id: restore it");
                }
                ids.add(id);
            }
            return ids;
        } catch (IOException e) {
            throw new PlansUnreadableException("the revoked plan keys: " + e.getMessage(), e);
        }
    }

    /** Keep {@code ids} beside those kept; a failure only costs them after a restart that the topic cannot cover. */
    public void keep(Set<String> kept, Set<String> ids) {
        if (kept.containsAll(ids)) {
            return;
        }
        Set<String> all = new TreeSet<>(kept);
        all.addAll(ids);
        if (all.size() > MAX_KEYS) {
            LOG.error("revoked plan keys not kept in {}: {} key ids, more than {}", file, all.size(), MAX_KEYS);
            return;
        }
        try {
            Files.createDirectories(file.getParent());
            Path tmp = file.resolveSibling(file.getFileName() + ".tmp");
            try (FileChannel out = FileChannel.open(tmp, StandardOpenOption.CREATE, StandardOpenOption.WRITE,
                    StandardOpenOption.TRUNCATE_EXISTING)) {
                out.write(ByteBuffer.wrap((String.join("\n", all) + "\n").getBytes(StandardCharsets.US_ASCII)));
                out.force(true);
            }
            try {
                Files.move(tmp, file, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
            } catch (AtomicMoveNotSupportedException e) {
                Files.move(tmp, file, StandardCopyOption.REPLACE_EXISTING);
            }
        } catch (IOException e) {
            LOG.error("revoked plan keys {} not kept in {}: {}", all, file, e.toString());
        }
    }
}
