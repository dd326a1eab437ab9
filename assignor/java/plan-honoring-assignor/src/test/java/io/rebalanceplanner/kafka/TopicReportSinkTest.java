package io.rebalanceplanner.kafka;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.concurrent.ExecutionException;
import org.apache.kafka.common.errors.TimeoutException;
import org.apache.kafka.common.errors.UnknownTopicOrPartitionException;
import org.junit.jupiter.api.Test;

/** A missing reports topic is told apart from other send failures (it gets one ERROR naming setup). */
class TopicReportSinkTest {
    @Test
    void aTopicAbsentFromMetadataOrUnknownToTheBrokerIsAMissingTopic() {
        assertTrue(TopicReportSink.missingTopic(new ExecutionException(
                new TimeoutException("Topic _rebalance_reports not present in metadata after 5000 ms."))));
        assertTrue(TopicReportSink.missingTopic(new UnknownTopicOrPartitionException("unknown")));
    }

    @Test
    void otherFailuresAreNot() {
        assertFalse(TopicReportSink.missingTopic(new TimeoutException("Expiring 1 record(s): 15000 ms has passed")));
        assertFalse(TopicReportSink.missingTopic(new ExecutionException(null)));
    }
}
