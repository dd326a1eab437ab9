package io.rebalanceplanner.kafka;

import io.rebalanceplanner.core.KeyRevocation;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Reads the compacted plans topic with a consumer that outlives the assignor instance.
 *
 * <p>Kafka Streams builds a new {@code TaskAssignor} for every rebalance, so the consumer, its positions and
 * the newest record seen live here and are shared through {@link SharedClients}: after the first read each
 * rebalance only fetches what was appended since. Every partition is read because the producer of plans
 * need not use Kafka's default partitioner.
 */
final class TopicPlanSource implements PlanSource, AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(TopicPlanSource.class);
    /** A revocation is written once or twice; a key rewritten more often than this is not worth more memory. */
    private static final int MAX_REVOCATIONS_PER_KEY = 16;

    private final Map<String, Object> clientProperties;
    private final String topic;
    private final String clientId;
    private KafkaConsumer<byte[], byte[]> consumer;
    private final Set<TopicPartition> assigned = new HashSet<>();
    /** Per partition, the last record for the group: within a partition the offset order is the truth. */
    private final Map<Integer, ConsumerRecord<byte[], byte[]>> lastByPartition = new java.util.HashMap<>();
    /** Every key-revocation record met, by record key (one per revoked key id; a rewrite replaces nothing). */
    private final Map<String, List<byte[]>> revocationsByKey = new java.util.LinkedHashMap<>();
    private long heldRevocationBytes;
    private boolean revocationDropLogged;

    TopicPlanSource(Map<String, Object> clientProperties, String topic, String clientId) {
        this.clientProperties = clientProperties;
        this.topic = topic;
        this.clientId = clientId;
    }

    private boolean missingTopicLogged;

    @Override
    public synchronized byte[] newest(String groupId, long timeoutMs) throws PlansUnreadableException {
        read(groupId, timeoutMs, new ArrayList<>());
        return newestValue();
    }

    /** The group's records appended since the last call (the first call: from the log start), in offset order. */
    @Override
    public synchronized List<byte[]> records(String groupId, long timeoutMs) throws PlansUnreadableException {
        List<byte[]> fresh = new ArrayList<>();
        read(groupId, timeoutMs, fresh);
        return fresh;
    }

    private void read(String groupId, long timeoutMs, List<byte[]> fresh) throws PlansUnreadableException {
        long deadline = System.currentTimeMillis() + timeoutMs;
        try {
            if (consumer == null) {
                consumer = new KafkaConsumer<>(consumerProperties());
            }
            List<PartitionInfo> infos = consumer.partitionsFor(topic, remaining(deadline));
            if (infos == null || infos.isEmpty()) {
                if (!missingTopicLogged) {
                    // Once, not at every rebalance: the group runs on Kafka's own assignment until the topic exists.
                    missingTopicLogged = true;
                    LOG.error("the plans topic '{}' does not exist: no plan can reach this application and it keeps "
                            + "Kafka's own assignment; create the product's topics with `rebalance-planner setup`",
                            topic);
                }
                return;
            }
            missingTopicLogged = false;
            List<TopicPartition> partitions = new ArrayList<>();
            for (PartitionInfo info : infos) {
                partitions.add(new TopicPartition(topic, info.partition()));
            }
            List<TopicPartition> added = new ArrayList<>();
            for (TopicPartition tp : partitions) {
                if (!assigned.contains(tp)) {
                    added.add(tp);
                }
            }
            if (!added.isEmpty()) {
                assigned.addAll(added);
                consumer.assign(assigned);
                consumer.seekToBeginning(added);
            }
            Map<TopicPartition, Long> ends = consumer.endOffsets(assigned, remaining(deadline));
            while (!caughtUp(ends, deadline)) {
                for (ConsumerRecord<byte[], byte[]> record : consumer.poll(pollTime(deadline))) {
                    if (record.value() != null && KeyRevocation.isRevocationKey(record.key())) {
                        keepRevocation(record.key(), record.value());
                        continue;
                    }
                    if (record.value() == null || record.key() == null
                            || !groupId.equals(new String(record.key(), java.nio.charset.StandardCharsets.UTF_8))) {
                        continue; // An unsigned tombstone withdraws nothing (docs/formats.md).
                    }
                    lastByPartition.put(record.partition(), record);
                    fresh.add(record.value());
                }
                if (System.currentTimeMillis() >= deadline && !caughtUp(ends, deadline)) {
                    throw new PlansUnreadableException("the plans topic '" + topic + "' was not read to its end within "
                            + timeoutMs + " ms", null);
                }
            }
        } catch (org.apache.kafka.common.errors.TimeoutException e) {
            throw new PlansUnreadableException("the plans topic '" + topic + "' could not be read within " + timeoutMs
                    + " ms: " + e.getMessage(), e);
        } catch (KafkaException | IllegalStateException e) {
            // The consumer may be unusable (authorization, fencing, closed): start afresh next time.
            close();
            throw new PlansUnreadableException("the plans topic '" + topic + "' could not be read: "
                    + e.getClass().getSimpleName() + ": " + e.getMessage(), e);
        }
    }

    /** Kept within bounds: a record larger than a revocation can be, or past what a reader holds, is dropped. */
    void keepRevocation(byte[] key, byte[] value) {
        String name = new String(key, java.nio.charset.StandardCharsets.UTF_8);
        List<byte[]> seen = revocationsByKey.get(name);
        boolean fits = value.length <= KeyRevocation.MAX_BYTES
                && heldRevocationBytes + value.length <= KeyRevocation.MAX_HELD_BYTES;
        if (!fits || (seen != null && seen.size() >= MAX_REVOCATIONS_PER_KEY)) {
            if (!revocationDropLogged) {
                revocationDropLogged = true;
                LOG.warn("the plans topic '{}' holds key-revocation records too large, too many for one key or past "
                        + "{} bytes in all: those are not read", topic, KeyRevocation.MAX_HELD_BYTES);
            }
            return;
        }
        revocationsByKey.computeIfAbsent(name, k -> new ArrayList<>()).add(value);
        heldRevocationBytes += value.length;
    }

    @Override
    public synchronized List<byte[]> revocations() {
        List<byte[]> all = new ArrayList<>();
        revocationsByKey.values().forEach(all::addAll);
        return all;
    }

    /** Across partitions only the record timestamps can tell which plan is newer. */
    private byte[] newestValue() {
        ConsumerRecord<byte[], byte[]> newest = null;
        for (ConsumerRecord<byte[], byte[]> r : lastByPartition.values()) {
            if (newest == null || r.timestamp() > newest.timestamp()
                    || (r.timestamp() == newest.timestamp() && r.partition() > newest.partition())) {
                newest = r;
            }
        }
        return newest == null ? null : newest.value();
    }

    private boolean caughtUp(Map<TopicPartition, Long> ends, long deadline) {
        for (Map.Entry<TopicPartition, Long> e : ends.entrySet()) {
            if (consumer.position(e.getKey(), remaining(deadline)) < e.getValue()) {
                return false;
            }
        }
        return true;
    }

    private static Duration remaining(long deadline) {
        return Duration.ofMillis(Math.max(1, deadline - System.currentTimeMillis()));
    }

    private static Duration pollTime(long deadline) {
        return Duration.ofMillis(Math.max(1, Math.min(200, deadline - System.currentTimeMillis())));
    }

    private Map<String, Object> consumerProperties() {
        Map<String, Object> props = new java.util.HashMap<>(clientProperties);
        props.putIfAbsent(ConsumerConfig.CLIENT_ID_CONFIG, clientId);
        props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        // Positions below a log start that moved (retention) restart from the earliest record, never the latest.
        props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        props.put(ConsumerConfig.ALLOW_AUTO_CREATE_TOPICS_CONFIG, "false");
        props.remove(ConsumerConfig.GROUP_ID_CONFIG);
        return props;
    }

    @Override
    public synchronized void close() {
        if (consumer != null) {
            try {
                consumer.close(org.apache.kafka.clients.consumer.CloseOptions.timeout(Duration.ofSeconds(1)));
            } catch (RuntimeException e) {
                LOG.warn("closing the plans consumer failed: {}", e.toString());
            }
            consumer = null;
            assigned.clear();
            lastByPartition.clear();
            revocationsByKey.clear(); // read again from the log start by the next consumer
            heldRevocationBytes = 0;
        }
    }
}
