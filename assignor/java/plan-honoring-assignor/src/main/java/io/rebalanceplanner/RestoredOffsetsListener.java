package io.rebalanceplanner;

import io.rebalanceplanner.core.RestoredOffsets;
import io.rebalanceplanner.core.RestoredOffsets.TaskRestore;
import io.rebalanceplanner.core.Task;
import io.rebalanceplanner.kafka.PlannerSettings;
import io.rebalanceplanner.kafka.ReportSink;
import io.rebalanceplanner.kafka.SharedClients;
import java.lang.reflect.Field;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.UUID;
import java.util.function.LongSupplier;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.TopologyDescription;
import org.apache.kafka.streams.processor.StateRestoreListener;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * What this member's active-task restoration replayed, per task, published as a restored-offsets report
 * ({@link RestoredOffsets}) on the reports topic: once at registration (nothing restored yet) and whenever a
 * restore of a changelog partition ends or is suspended. Per task it keeps the latest restore since the member
 * started: the records replayed and when it began (a task with several stores: from its first store's start
 * until all have ended). Standby and warmup loading is not restoration here (Kafka reports it to a
 * StandbyUpdateListener). Register with one line, before {@code streams.start()}:
 *
 * <pre>{@code streams.setGlobalStateRestoreListener(RestoredOffsetsListener.of(streams, topology, props));}</pre>
 *
 * <p>Kafka Streams takes one global restore listener: an application that has its own passes it as
 * {@code delegate}, which receives every callback too. Never throws into Kafka Streams: a failed publish is logged
 * and retried with the next restore.
 */
public final class RestoredOffsetsListener implements StateRestoreListener {
    private static final Logger LOG = LoggerFactory.getLogger(RestoredOffsetsListener.class);

    private final String groupId;
    private final String processId;
    private final Map<String, Integer> storeSubtopology;
    private final ReportSink sink;
    private final LongSupplier clock;
    private final StateRestoreListener delegate;
    private final Map<Task, TaskRestore> restores = new TreeMap<>();
    private final Map<Task, Set<TopicPartition>> restoring = new HashMap<>();

    RestoredOffsetsListener(String groupId, String processId, Map<String, Integer> storeSubtopology,
            ReportSink sink, LongSupplier clock, StateRestoreListener delegate) {
        this.groupId = groupId;
        this.processId = processId;
        this.storeSubtopology = Map.copyOf(storeSubtopology);
        this.sink = sink;
        this.clock = clock;
        this.delegate = delegate;
    }

    /** The listener for {@code streams}, publishing with the plugin's settings in {@code props}. */
    public static RestoredOffsetsListener of(KafkaStreams streams, Topology topology, Properties props) {
        return of(streams, topology, props, null);
    }

    /** As {@link #of(KafkaStreams, Topology, Properties)}, also calling {@code delegate} (may be null). */
    public static RestoredOffsetsListener of(KafkaStreams streams, Topology topology, Properties props,
            StateRestoreListener delegate) {
        Map<String, Object> configs = new HashMap<>();
        props.stringPropertyNames().forEach(name -> configs.put(name, props.getProperty(name)));
        PlannerSettings settings = PlannerSettings.from(configs);
        RestoredOffsetsListener listener = new RestoredOffsetsListener(settings.applicationId(),
                processId(streams).toString(), storeSubtopologies(topology.describe()),
                SharedClients.reportSink(settings), System::currentTimeMillis, delegate);
        listener.publish();
        return listener;
    }

    /**
     * The instance's process id, the one its subscription (and so the leader's state report) carries. Kafka
     * Streams has no public accessor for it: read from its field, named in the error when that ever changes.
     */
    static UUID processId(KafkaStreams streams) {
        try {
            Field field = KafkaStreams.class.getDeclaredField("processId");
            field.setAccessible(true);
            return (UUID) field.get(streams);
        } catch (ReflectiveOperationException | RuntimeException e) {
            throw new IllegalStateException("cannot read KafkaStreams.processId (this Kafka Streams version keeps "
                    + "it elsewhere): " + e, e);
        }
    }

    /** Store name to its subtopology: a changelog partition is its task's partition, the store names the rest. */
    static Map<String, Integer> storeSubtopologies(TopologyDescription description) {
        Map<String, Integer> out = new HashMap<>();
        for (TopologyDescription.Subtopology sub : description.subtopologies()) {
            for (TopologyDescription.Node node : sub.nodes()) {
                if (node instanceof TopologyDescription.Processor processor) {
                    processor.stores().forEach(store -> out.put(store, sub.id()));
                }
            }
        }
        return out;
    }

    /** Per task, its latest restore so far (a copy). */
    public synchronized Map<Task, TaskRestore> restores() {
        return new TreeMap<>(restores);
    }

    private Task task(TopicPartition tp, String store) {
        Integer sub = storeSubtopology.get(store);
        return sub == null ? null : new Task(sub, tp.partition());
    }

    @Override
    public void onRestoreStart(TopicPartition tp, String store, long startOffset, long endOffset) {
        synchronized (this) {
            Task task = task(tp, store);
            if (task != null) {
                Set<TopicPartition> open = restoring.computeIfAbsent(task, t -> new HashSet<>());
                if (open.isEmpty()) { // a new restore of the task begins; its other stores join it
                    restores.put(task, new TaskRestore(0, clock.getAsLong()));
                }
                open.add(tp);
            }
        }
        if (delegate != null) {
            delegate.onRestoreStart(tp, store, startOffset, endOffset);
        }
    }

    @Override
    public void onBatchRestored(TopicPartition tp, String store, long batchEndOffset, long numRestored) {
        synchronized (this) {
            Task task = task(tp, store);
            TaskRestore r = task == null ? null : restores.get(task);
            if (r != null && numRestored > 0) {
                long sum = r.offsets() > Long.MAX_VALUE - numRestored ? Long.MAX_VALUE : r.offsets() + numRestored;
                restores.put(task, new TaskRestore(sum, r.startedAt()));
            }
        }
        if (delegate != null) {
            delegate.onBatchRestored(tp, store, batchEndOffset, numRestored);
        }
    }

    @Override
    public void onRestoreEnd(TopicPartition tp, String store, long totalRestored) {
        finished(tp, store);
        if (delegate != null) {
            delegate.onRestoreEnd(tp, store, totalRestored);
        }
    }

    @Override
    public void onRestoreSuspended(TopicPartition tp, String store, long totalRestored) {
        finished(tp, store);
        if (delegate != null) {
            delegate.onRestoreSuspended(tp, store, totalRestored);
        }
    }

    private void finished(TopicPartition tp, String store) {
        synchronized (this) {
            Task task = task(tp, store);
            Set<TopicPartition> open = task == null ? null : restoring.get(task);
            if (open != null) {
                open.remove(tp);
            }
        }
        publish();
    }

    /** Publishes the member's restores now; a failure is logged, never thrown into Kafka Streams. */
    void publish() {
        try {
            byte[] value = RestoredOffsets.encode(groupId, processId, clock.getAsLong(), restores());
            sink.publish(Map.of(RestoredOffsets.key(groupId, processId), value));
        } catch (RuntimeException e) {
            LOG.warn("restored offsets of {} were not published: {}", processId, e.toString());
        }
    }
}
