package io.rebalanceplanner.kafka;

import java.time.Duration;
import java.util.HashMap;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.ListOffsetsOptions;
import org.apache.kafka.clients.admin.ListOffsetsResult.ListOffsetsResultInfo;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/** Lists end offsets with an Admin client that outlives the assignor instance (see {@link SharedClients}). */
final class AdminEndOffsets implements EndOffsetSource, AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(AdminEndOffsets.class);

    private final Map<String, Object> clientProperties;
    private final String clientId;
    private Admin admin;

    AdminEndOffsets(Map<String, Object> clientProperties, String clientId) {
        this.clientProperties = clientProperties;
        this.clientId = clientId;
    }

    @Override
    public synchronized Map<TopicPartition, Long> endOffsets(Set<TopicPartition> partitions, long timeoutMs)
            throws EndOffsetsUnavailableException {
        if (partitions.isEmpty()) {
            return Map.of();
        }
        Map<TopicPartition, OffsetSpec> latest = new HashMap<>();
        for (TopicPartition tp : partitions) {
            latest.put(tp, OffsetSpec.latest());
        }
        try {
            if (admin == null) {
                Map<String, Object> props = new HashMap<>(clientProperties);
                props.putIfAbsent(AdminClientConfig.CLIENT_ID_CONFIG, clientId);
                admin = Admin.create(props);
            }
            int timeout = (int) Math.min(Integer.MAX_VALUE, timeoutMs);
            Map<TopicPartition, ListOffsetsResultInfo> listed = admin.listOffsets(latest,
                    new ListOffsetsOptions().timeoutMs(timeout)).all().get(timeoutMs, TimeUnit.MILLISECONDS);
            Map<TopicPartition, Long> out = new HashMap<>();
            listed.forEach((tp, info) -> out.put(tp, info.offset()));
            return out;
        } catch (TimeoutException e) {
            throw new EndOffsetsUnavailableException("changelog end offsets not listed within " + timeoutMs + " ms",
                    e);
        } catch (ExecutionException | KafkaException e) {
            Throwable cause = e instanceof ExecutionException && e.getCause() != null ? e.getCause() : e;
            // The client may be unusable (authorization, closed): start afresh next time.
            close();
            throw new EndOffsetsUnavailableException("changelog end offsets not listed: "
                    + cause.getClass().getSimpleName() + ": " + cause.getMessage(), cause);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new EndOffsetsUnavailableException("interrupted while listing changelog end offsets", e);
        }
    }

    @Override
    public synchronized void close() {
        if (admin != null) {
            try {
                admin.close(Duration.ofSeconds(1));
            } catch (RuntimeException e) {
                LOG.warn("closing the end-offsets admin client failed: {}", e.toString());
            }
            admin = null;
        }
    }
}
