package io.rebalanceplanner.broker;

import io.rebalanceplanner.core.PlanVerifier;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.WakeupException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The assignor's only I/O, on one daemon thread: reads the whole plans topic into the {@link PlanCache} and keeps
 * following it, and publishes queued {@link Decision}s. Errors are logged and retried with a growing pause; the
 * cache keeps what it had verified.
 */
final class PlanReader implements DecisionSink, AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(PlanReader.class);
    static final int MAX_PENDING_DECISIONS = 10_000;
    private static final long PARTITION_REFRESH_MS = 30_000;
    private static final long MAX_BACKOFF_MS = 30_000;

    private final BrokerAssignorSettings settings;
    private final PlanCache cache;
    private final Map<String, Decision> pending = new ConcurrentHashMap<>();
    private final Thread thread;
    private volatile boolean closed;
    private volatile KafkaConsumer<byte[], byte[]> consumer;
    private KafkaProducer<String, byte[]> producer;
    private Map<TopicPartition, Long> startEnds;
    private boolean loaded;
    private long partitionsCheckedAt;

    PlanReader(BrokerAssignorSettings settings) {
        this.settings = settings;
        this.cache = new PlanCache(new PlanVerifier(settings.verifyKeys(), settings.clockSkewMs()),
                settings.maxPlans());
        this.thread = new Thread(this::run, "rebalance-planner-plan-reader");
        thread.setDaemon(true);
    }

    PlanCache cache() {
        return cache;
    }

    void start() {
        thread.start();
    }

    @Override
    public boolean offer(Decision decision) {
        if (!settings.decisionsEnabled()) {
            return true;
        }
        String key = decision.key();
        if (pending.size() >= MAX_PENDING_DECISIONS && !pending.containsKey(key)) {
            return false;
        }
        pending.put(key, decision);
        return true;
    }

    private void run() {
        long backoff = 100;
        while (!closed) {
            try {
                step();
                backoff = 100;
            } catch (WakeupException e) {
                if (!closed) {
                    LOG.warn("plans reader woken up unexpectedly");
                }
            } catch (RuntimeException e) {
                LOG.warn("reading plans from {} failed (retrying in {} ms): {}", settings.plansTopic(), backoff,
                        e.toString());
                cache.publish(loaded, e.getClass().getSimpleName() + ": " + e.getMessage());
                closeClients();
                pause(backoff);
                // Until the topic was read once every group falls back: retry sooner then.
                backoff = Math.min(loaded ? MAX_BACKOFF_MS : MAX_BACKOFF_MS / 6, backoff * 2);
            }
        }
        closeClients();
    }

    private void step() {
        long now = System.currentTimeMillis();
        if (consumer == null) {
            consumer = new KafkaConsumer<>(consumerProperties());
            startEnds = null;
            partitionsCheckedAt = 0;
        }
        if (now - partitionsCheckedAt >= PARTITION_REFRESH_MS) {
            assignPartitions();
            partitionsCheckedAt = now;
        }
        for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(settings.pollMs()))) {
            cache.offer(r.key(), r.value(), System.currentTimeMillis());
        }
        if (!loaded && startEnds != null && reached(startEnds)) {
            loaded = true;
            LOG.info("plans topic {} read: {} group(s) cached, {} record(s) rejected", settings.plansTopic(),
                    cache.snapshot().size(), cache.rejectedRecords());
        }
        cache.retryDeferred(System.currentTimeMillis());
        cache.publish(loaded, null);
        publishDecisions();
    }

    /** Every partition, from the beginning: the plans producer need not use Kafka's default partitioner. */
    private void assignPartitions() {
        List<PartitionInfo> infos = consumer.partitionsFor(settings.plansTopic(), Duration.ofSeconds(10));
        Set<TopicPartition> all = new HashSet<>();
        if (infos != null) {
            for (PartitionInfo info : infos) {
                all.add(new TopicPartition(settings.plansTopic(), info.partition()));
            }
        }
        Set<TopicPartition> added = new HashSet<>(all);
        added.removeAll(consumer.assignment());
        if (!added.isEmpty()) {
            consumer.assign(all);
            consumer.seekToBeginning(added);
        }
        if (startEnds == null) {
            startEnds = consumer.endOffsets(all, Duration.ofSeconds(10));
        }
    }

    private boolean reached(Map<TopicPartition, Long> ends) {
        for (Map.Entry<TopicPartition, Long> e : ends.entrySet()) {
            if (consumer.position(e.getKey(), Duration.ofSeconds(10)) < e.getValue()) {
                return false;
            }
        }
        return true;
    }

    private void publishDecisions() {
        if (pending.isEmpty()) {
            return;
        }
        if (producer == null) {
            producer = new KafkaProducer<>(producerProperties());
        }
        List<String> keys = new ArrayList<>(pending.keySet());
        for (String key : keys) {
            Decision d = pending.remove(key);
            if (d == null) {
                continue;
            }
            producer.send(new ProducerRecord<>(settings.decisionsTopic(), key,
                    d.json(PlanFollowingTaskAssignor.NAME)), (meta, error) -> {
                        if (error != null) {
                            LOG.warn("decision for {} not published to {}: {}", key, settings.decisionsTopic(),
                                    error.toString());
                        }
                    });
        }
    }

    private Map<String, Object> consumerProperties() {
        Map<String, Object> props = new HashMap<>(settings.clientProperties());
        props.putIfAbsent(ConsumerConfig.CLIENT_ID_CONFIG, "rebalance-planner-broker-assignor-plans");
        props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        props.put(ConsumerConfig.ALLOW_AUTO_CREATE_TOPICS_CONFIG, "false");
        // Positions below a log start that moved (retention) restart from the earliest record, never the latest.
        props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        // Bounded memory: a plan record is at most 1 MiB; a fetch holds a few of them.
        props.putIfAbsent(ConsumerConfig.MAX_PARTITION_FETCH_BYTES_CONFIG, 2 * 1024 * 1024);
        props.putIfAbsent(ConsumerConfig.FETCH_MAX_BYTES_CONFIG, 8 * 1024 * 1024);
        props.putIfAbsent(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, 100);
        props.remove(ConsumerConfig.GROUP_ID_CONFIG);
        return props;
    }

    private Map<String, Object> producerProperties() {
        Map<String, Object> props = new HashMap<>(settings.clientProperties());
        props.putIfAbsent(ProducerConfig.CLIENT_ID_CONFIG, "rebalance-planner-broker-assignor-decisions");
        props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        props.putIfAbsent(ProducerConfig.MAX_BLOCK_MS_CONFIG, 5000);
        props.putIfAbsent(ProducerConfig.LINGER_MS_CONFIG, 100);
        props.putIfAbsent(ProducerConfig.BUFFER_MEMORY_CONFIG, 8 * 1024 * 1024);
        // The consumer/producer properties of the broker's config are not inherited: a bootstrap must be given.
        return props;
    }

    private void pause(long ms) {
        try {
            Thread.sleep(ms);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            closed = true;
        }
    }

    private void closeClients() {
        KafkaConsumer<byte[], byte[]> c = consumer;
        consumer = null;
        if (c != null) {
            try {
                c.close(org.apache.kafka.clients.consumer.CloseOptions.timeout(Duration.ofSeconds(1)));
            } catch (RuntimeException e) {
                LOG.warn("closing the plans consumer failed: {}", e.toString());
            }
        }
        if (producer != null) {
            try {
                producer.close(Duration.ofSeconds(1));
            } catch (RuntimeException e) {
                LOG.warn("closing the decisions producer failed: {}", e.toString());
            }
            producer = null;
        }
    }

    @Override
    public void close() {
        closed = true;
        KafkaConsumer<byte[], byte[]> c = consumer;
        if (c != null) {
            c.wakeup();
        }
        thread.interrupt();
        try {
            thread.join(5000);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
