package io.rebalanceplanner.kafka;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.errors.UnknownTopicOrPartitionException;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Publishes state reports without ever holding up or failing a rebalance: sends are bounded by
 * {@code max.block.ms} and the wait for acknowledgements by the reports timeout; failures are only logged.
 */
final class TopicReportSink implements ReportSink, AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(TopicReportSink.class);

    private final Map<String, Object> clientProperties;
    private final String topic;
    private final String clientId;
    private final long timeoutMs;
    private KafkaProducer<String, byte[]> producer;
    private boolean missingTopicLogged;

    TopicReportSink(Map<String, Object> clientProperties, String topic, String clientId, long timeoutMs) {
        this.clientProperties = clientProperties;
        this.topic = topic;
        this.clientId = clientId;
        this.timeoutMs = timeoutMs;
    }

    @Override
    public synchronized void publish(Map<String, byte[]> records) {
        long deadline = System.currentTimeMillis() + timeoutMs;
        List<Future<RecordMetadata>> sent = new ArrayList<>();
        try {
            if (producer == null) {
                producer = new KafkaProducer<>(producerProperties());
            }
            for (Map.Entry<String, byte[]> r : records.entrySet()) {
                sent.add(producer.send(new ProducerRecord<>(topic, r.getKey(), r.getValue()), (meta, error) -> {
                    if (error != null && !missingTopic(error)) {
                        LOG.warn("state report {} was not published to {}: {}", r.getKey(), topic, error.toString());
                    }
                }));
            }
            for (Future<RecordMetadata> f : sent) {
                f.get(Math.max(0, deadline - System.currentTimeMillis()), TimeUnit.MILLISECONDS);
            }
            missingTopicLogged = false;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            LOG.warn("interrupted while publishing state reports to {}", topic);
        } catch (Exception e) {
            if (missingTopic(e)) {
                logMissingTopic();
            } else {
                LOG.warn("state reports to {} not confirmed within {} ms: {}", topic, timeoutMs, e.toString());
            }
        }
    }

    /**
     * Whether a send failed because the topic does not exist: the producer then waits for metadata that never
     * names it ("not present in metadata") or the broker answers UNKNOWN_TOPIC_OR_PARTITION.
     */
    static boolean missingTopic(Throwable error) {
        for (Throwable t = error; t != null; t = t.getCause()) {
            if (t instanceof UnknownTopicOrPartitionException
                    || (t.getMessage() != null && t.getMessage().contains("not present in metadata"))) {
                return true;
            }
        }
        return false;
    }

    /** One ERROR until reports get through again, not a warning at every rebalance. */
    private void logMissingTopic() {
        if (!missingTopicLogged) {
            missingTopicLogged = true;
            LOG.error("the reports topic '{}' does not exist: this application's state reports are lost and the "
                    + "pipeline plans it from group metadata only; create the product's topics with "
                    + "`rebalance-planner setup`", topic);
        }
    }

    private Map<String, Object> producerProperties() {
        Map<String, Object> props = new HashMap<>(clientProperties);
        props.putIfAbsent(ProducerConfig.CLIENT_ID_CONFIG, clientId);
        props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        // A report is only useful while fresh; never block a rebalance on a missing broker for long.
        props.putIfAbsent(ProducerConfig.MAX_BLOCK_MS_CONFIG, Math.max(100L, timeoutMs));
        props.putIfAbsent(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, 10000);
        props.putIfAbsent(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, 15000);
        props.putIfAbsent(ProducerConfig.LINGER_MS_CONFIG, 0);
        props.putIfAbsent(ProducerConfig.MAX_REQUEST_SIZE_CONFIG, 1024 * 1024 + 64 * 1024);
        return props;
    }

    @Override
    public synchronized void close() {
        if (producer != null) {
            try {
                producer.close(Duration.ofSeconds(1));
            } catch (RuntimeException e) {
                LOG.warn("closing the reports producer failed: {}", e.toString());
            }
            producer = null;
        }
    }
}
