package io.rebalanceplanner.kafka;

import java.util.Map;
import java.util.Set;
import org.apache.kafka.common.TopicPartition;

/** The current end offsets of changelog partitions, read within a deadline. */
@FunctionalInterface
public interface EndOffsetSource {
    /** @throws EndOffsetsUnavailableException when the offsets could not be listed in time */
    Map<TopicPartition, Long> endOffsets(Set<TopicPartition> partitions, long timeoutMs)
            throws EndOffsetsUnavailableException;
}
