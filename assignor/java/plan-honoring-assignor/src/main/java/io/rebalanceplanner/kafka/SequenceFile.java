package io.rebalanceplanner.kafka;

import io.rebalanceplanner.core.PlanVerifier;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.AtomicMoveNotSupportedException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;

/**
 * The highest plan sequence this instance verified for its group, kept in {@code rebalance.planner.state.dir}: the
 * replay floor that survives a restart even when the record that set it has left the plans topic (compaction).
 * One small file per group, written whole (temporary file, fsync, atomic rename).
 */
final class SequenceFile {
    private static final int MAX_BYTES = 32;

    private final Path file;

    SequenceFile(Path dir, String groupId) {
        // The group id may be 249 characters of anything: its digest names the file.
        this.file = dir.resolve("rebalance-planner-plan-sequence-"
                + PlanVerifier.sha256Hex(groupId.getBytes(StandardCharsets.UTF_8)).substring(0, 32));
    }

    Path path() {
        return file;
    }

    /** The sequence kept, or null when none is; a damaged file is an error naming it (never silently dropped). */
    Long read() throws IOException {
        if (!Files.exists(file)) {
            return null;
        }
        if (Files.size(file) > MAX_BYTES) {
            throw new IOException(file + " is larger than " + MAX_BYTES + " bytes: not a plan sequence file");
        }
        String text = Files.readString(file, StandardCharsets.US_ASCII).strip();
        if (!text.matches("[1-9][0-9]{0,15}")) {
            throw new IOException(file + " does not hold a plan sequence (1.." + PlanVerifier.MAX_SEQUENCE
                    + "): restore it, or delete it to forget the floor");
        }
        long value = Long.parseLong(text); // at most 16 digits: fits a long
        if (value > PlanVerifier.MAX_SEQUENCE) {
            throw new IOException(file + " holds " + value + ", beyond " + PlanVerifier.MAX_SEQUENCE);
        }
        return value;
    }

    void write(long sequence) throws IOException {
        Files.createDirectories(file.getParent());
        Path tmp = file.resolveSibling(file.getFileName() + ".tmp");
        try (FileChannel out = FileChannel.open(tmp, StandardOpenOption.CREATE, StandardOpenOption.WRITE,
                StandardOpenOption.TRUNCATE_EXISTING)) {
            out.write(ByteBuffer.wrap((sequence + "\n").getBytes(StandardCharsets.US_ASCII)));
            out.force(true);
        }
        try {
            Files.move(tmp, file, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
        } catch (AtomicMoveNotSupportedException e) {
            Files.move(tmp, file, StandardCopyOption.REPLACE_EXISTING);
        }
    }
}
