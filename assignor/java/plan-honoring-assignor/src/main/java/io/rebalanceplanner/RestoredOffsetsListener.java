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
import java.util.concurrent.Executor;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;
import java.util.function.LongSupplier;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.TopologyDescription;
import org.apache.kafka.streams.processor.StandbyUpdateListener;
import org.apache.kafka.streams.processor.StateRestoreListener;
import org.apache.kafka.streams.processor.TaskId;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * What this member's state restoration replayed, per task, published as a restored-offsets report
 * ({@link RestoredOffsets}) on the reports topic: once at registration (nothing restored yet) and whenever the
 * restore of a changelog partition ends or is suspended. Restoration here is every record loaded into a store the
 * task does not yet process from: an active task's restore, and a standby's or warmup's loading (Kafka reports
 * those to a StandbyUpdateListener; KIP-924 has one role for both). Per task it keeps the latest restore since
 * the member started: the records loaded and when it began. A restore begins when a task's first changelog
 * partition starts loading while none is; a warmup promoted to active continues its restore into the active's.
 * Register both listeners with one line, before {@code streams.start()}:
 *
 * <pre>{@code RestoredOffsetsListener.register(streams, topology, props);}</pre>
 *
 * <p>Kafka Streams takes one global restore listener and one standby listener: an application with its own passes
 * them as delegates, which receive every callback too. Never throws into Kafka Streams: a failed publish is logged
 * and retried with the next one. Publishing waits for the broker's acknowledgement, so it runs on the listener's own
 * thread, never on Kafka Streams' restoring thread; restores that end while one is pending share its publish.
 * Records loaded by a restore still under way (a hot standby's loading never ends) are published within
 * {@code rebalance.planner.restored.publish.interval.ms}: one delayed publish per interval while loading goes on.
 */
public final class RestoredOffsetsListener implements StateRestoreListener, StandbyUpdateListener {
    private static final Logger LOG = LoggerFactory.getLogger(RestoredOffsetsListener.class);

    private final String groupId;
    private final String processId;
    private final Map<String, Integer> storeSubtopology;
    private final ReportSink sink;
    private final LongSupplier clock;
    private final StateRestoreListener restoreDelegate;
    private final StandbyUpdateListener standbyDelegate;
    private final Executor publisher;
    private final Later later;
    private final long publishIntervalMs;
    private boolean publishPending; // guarded by this: a publish is queued and will read the restores when it runs
    private boolean loadPublishPending; // guarded by this: a delayed publish of loaded records is scheduled
    private final Map<Task, TaskRestore> restores = new TreeMap<>();
    private final Map<Task, Set<TopicPartition>> loading = new HashMap<>();
    private final Set<Task> promoted = new HashSet<>();

    /** Runs a task after a delay, on the publishing thread. */
    interface Later {
        void run(Runnable task, long delayMs);
    }

    /** Publishes only when a restore ends or is suspended (no delayed publish of records still loading). */
    RestoredOffsetsListener(String groupId, String processId, Map<String, Integer> storeSubtopology,
            ReportSink sink, LongSupplier clock, StateRestoreListener restoreDelegate,
            StandbyUpdateListener standbyDelegate, Executor publisher) {
        this(groupId, processId, storeSubtopology, sink, clock, restoreDelegate, standbyDelegate, publisher,
                (task, delayMs) -> { }, 0);
    }

    RestoredOffsetsListener(String groupId, String processId, Map<String, Integer> storeSubtopology,
            ReportSink sink, LongSupplier clock, StateRestoreListener restoreDelegate,
            StandbyUpdateListener standbyDelegate, Executor publisher, Later later, long publishIntervalMs) {
        this.later = later;
        this.publishIntervalMs = publishIntervalMs;
        this.groupId = groupId;
        this.processId = processId;
        this.storeSubtopology = Map.copyOf(storeSubtopology);
        this.sink = sink;
        this.clock = clock;
        this.restoreDelegate = restoreDelegate;
        this.standbyDelegate = standbyDelegate;
        this.publisher = publisher;
    }

    /**
     * Registers the listener on {@code streams} (restore and standby), publishing with the {@code rebalance.planner.*}
     * settings in {@code props}; under either group protocol (a streams-protocol application has no plugin).
     */
    public static RestoredOffsetsListener register(KafkaStreams streams, Topology topology, Properties props) {
        return register(streams, topology, props, null, null);
    }

    /** As {@link #register(KafkaStreams, Topology, Properties)}, also calling the delegates (either may be null). */
    public static RestoredOffsetsListener register(KafkaStreams streams, Topology topology, Properties props,
            StateRestoreListener restoreDelegate, StandbyUpdateListener standbyDelegate) {
        Map<String, Object> configs = new HashMap<>();
        props.stringPropertyNames().forEach(name -> configs.put(name, props.getProperty(name)));
        PlannerSettings settings = PlannerSettings.from(configs);
        String processId = processId(streams).toString();
        ScheduledExecutorService publisher = Executors.newSingleThreadScheduledExecutor(run -> {
            Thread thread = new Thread(run, "rbp-restored-offsets-" + processId);
            thread.setDaemon(true); // never keeps the application's JVM alive
            return thread;
        });
        RestoredOffsetsListener listener = new RestoredOffsetsListener(settings.applicationId(), processId,
                storeSubtopologies(topology.describe()), SharedClients.reportSink(settings), System::currentTimeMillis,
                restoreDelegate, standbyDelegate, publisher,
                (task, delayMs) -> publisher.schedule(task, delayMs, TimeUnit.MILLISECONDS),
                settings.restoredPublishIntervalMs());
        streams.setGlobalStateRestoreListener(listener);
        streams.setStandbyUpdateListener(listener);
        listener.schedulePublish();
        return listener;
    }

    /**
     * The instance's process id, the one its subscription (and so the leader's state report) carries, or under the
     * streams protocol its heartbeats (and so the broker's description of the group). Kafka
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
    public static Map<String, Integer> storeSubtopologies(TopologyDescription description) {
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

    /** A changelog partition of the task starts loading: a new restore unless one is under way or continues. */
    private synchronized void started(Task task, TopicPartition tp, boolean active) {
        if (task == null) {
            return;
        }
        Set<TopicPartition> open = loading.computeIfAbsent(task, t -> new HashSet<>());
        boolean continues = active && promoted.remove(task) && restores.containsKey(task);
        if (open.isEmpty() && !continues) {
            restores.put(task, new TaskRestore(0, clock.getAsLong()));
        }
        open.add(tp);
    }

    private void loaded(Task task, long records) {
        synchronized (this) {
            TaskRestore r = task == null ? null : restores.get(task);
            if (r == null || records <= 0) {
                return;
            }
            long sum = r.offsets() > Long.MAX_VALUE - records ? Long.MAX_VALUE : r.offsets() + records;
            restores.put(task, new TaskRestore(sum, r.startedAt()));
            if (publishIntervalMs == 0 || loadPublishPending) {
                return;
            }
            loadPublishPending = true;
        }
        // A restore still under way is seen within the interval, not only when it ends (a hot standby never does).
        // Records loaded once the publish runs get a delayed publish of their own.
        queuePublish(run -> later.run(run, publishIntervalMs), () -> loadPublishPending = false);
    }

    private void finished(Task task, TopicPartition tp, boolean promotedToActive) {
        synchronized (this) {
            Set<TopicPartition> open = task == null ? null : loading.get(task);
            if (open != null) {
                open.remove(tp);
            }
            if (promotedToActive && task != null) {
                promoted.add(task);
            }
        }
        schedulePublish();
    }

    /** Queues a publish of the restores unless one is queued already (it will read them when it runs). */
    void schedulePublish() {
        synchronized (this) {
            if (publishPending) {
                return;
            }
            publishPending = true;
        }
        queuePublish(publisher::execute, () -> publishPending = false); // later changes get a publish of their own
    }

    /**
     * Hands one publish to {@code queue}; {@code clearPending} (under this lock) runs when the publish starts, or at
     * once if the queue refuses it, so the next change queues a publish again.
     */
    private void queuePublish(Consumer<Runnable> queue, Runnable clearPending) {
        try {
            queue.accept(() -> {
                synchronized (this) {
                    clearPending.run();
                }
                publish();
            });
        } catch (RuntimeException e) {
            synchronized (this) {
                clearPending.run();
            }
            LOG.warn("restored offsets of {} were not published: {}", processId, e.toString());
        }
    }

    @Override
    public void onRestoreStart(TopicPartition tp, String store, long startOffset, long endOffset) {
        started(task(tp, store), tp, true);
        if (restoreDelegate != null) {
            restoreDelegate.onRestoreStart(tp, store, startOffset, endOffset);
        }
    }

    @Override
    public void onBatchRestored(TopicPartition tp, String store, long batchEndOffset, long numRestored) {
        loaded(task(tp, store), numRestored);
        if (restoreDelegate != null) {
            restoreDelegate.onBatchRestored(tp, store, batchEndOffset, numRestored);
        }
    }

    @Override
    public void onRestoreEnd(TopicPartition tp, String store, long totalRestored) {
        finished(task(tp, store), tp, false);
        if (restoreDelegate != null) {
            restoreDelegate.onRestoreEnd(tp, store, totalRestored);
        }
    }

    @Override
    public void onRestoreSuspended(TopicPartition tp, String store, long totalRestored) {
        finished(task(tp, store), tp, false);
        if (restoreDelegate != null) {
            restoreDelegate.onRestoreSuspended(tp, store, totalRestored);
        }
    }

    @Override
    public void onUpdateStart(TopicPartition tp, String store, long startingOffset) {
        started(task(tp, store), tp, false);
        if (standbyDelegate != null) {
            standbyDelegate.onUpdateStart(tp, store, startingOffset);
        }
    }

    @Override
    public void onBatchLoaded(TopicPartition tp, String store, TaskId taskId, long batchEndOffset, long batchSize,
            long currentEndOffset) {
        loaded(new Task(taskId.subtopology(), taskId.partition()), batchSize);
        if (standbyDelegate != null) {
            standbyDelegate.onBatchLoaded(tp, store, taskId, batchEndOffset, batchSize, currentEndOffset);
        }
    }

    @Override
    public void onUpdateSuspended(TopicPartition tp, String store, long storeOffset, long currentEndOffset,
            SuspendReason reason) {
        finished(task(tp, store), tp, reason == SuspendReason.PROMOTED);
        if (standbyDelegate != null) {
            standbyDelegate.onUpdateSuspended(tp, store, storeOffset, currentEndOffset, reason);
        }
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
