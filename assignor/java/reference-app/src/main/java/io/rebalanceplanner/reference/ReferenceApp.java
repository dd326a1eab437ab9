package io.rebalanceplanner.reference;

import io.rebalanceplanner.RestoredOffsetsListener;
import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.TopicConfig;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.ThreadMetadata;
import org.apache.kafka.streams.TaskMetadata;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Repartitioned;
import org.apache.kafka.streams.processor.StandbyUpdateListener;
import org.apache.kafka.streams.processor.StateRestoreListener;
import org.apache.kafka.streams.processor.TaskId;
import org.apache.kafka.streams.processor.api.FixedKeyProcessor;
import org.apache.kafka.streams.processor.api.FixedKeyProcessorContext;
import org.apache.kafka.streams.processor.api.FixedKeyRecord;
import org.apache.kafka.streams.state.Stores;

/**
 * A small real Kafka Streams application for end-to-end checks of the plan-honoring assignor.
 *
 * <p>Two subtopologies: 0 reads the input topic and re-keys each record by its value (stateless), 1 counts
 * per key into a persistent RocksDB store with a changelog (stateful). Events go to {@code --events} as JSON
 * lines in the Python runtime's vocabulary so the same tests can read both.
 */
public final class ReferenceApp {
    static final String STORE = "counts";

    private ReferenceApp() {}

    public static void main(String[] args) throws Exception {
        Flags flags = new Flags(args);
        if (flags.has("help")) {
            System.out.println(usage());
            return;
        }
        if (flags.has("produce")) {
            Producer.run(flags);
            return;
        }
        System.exit(run(flags));
    }

    static String usage() {
        return String.join("\n",
                "usage: reference-app --bootstrap HOST:PORT --application-id ID [options]",
                "  --input-topic T (input)  --partitions N (12, when creating the topic)",
                "  --state-dir DIR  --threads N (1)  --standbys N (0)  --acceptable-recovery-lag N (10000)",
                "  --max-warmup-replicas N (2)  --probing-interval-ms N (600000; Kafka's floor is 60000)",
                "  --plugin true|false (true)  --verify-keys id=hex,...  --plans-topic T  --reports-topic T",
                "  --plan-check-interval-ms N (the plugin's default, 300000)  --session-timeout-ms N (45000)",
                "  --events FILE  --exit-on-stdin-eof  --commit-interval-ms N (1000)  --cache-bytes N (0)",
                "  --application-server HOST:PORT  --create-topics true|false (true)",
                "  --scheduled-rebalance-max-delay-ms N (0: no deferral)  --hold-without-caught-up-copy",
                "  --rocksdb-memory-mb N (RocksDB's default per store: ~50 MB cache + memtables each)",
                "  --group-protocol classic|streams (classic; streams: KIP-1071, the broker assigns, no plugin)",
                "  --client-properties FILE (connection settings for every client: security.protocol, sasl.*, ssl.*)",
                "  --restored-reports true|false (true with the plugin or the streams protocol: each member publishes",
                "    what it restored on --reports-topic through RestoredOffsetsListener)",
                "produce mode: --produce N --keys K [--input-topic T --partitions N --bootstrap B]");
    }

    static Topology topology(String inputTopic, Counters counters) {
        StreamsBuilder builder = new StreamsBuilder();
        builder.stream(inputTopic, Consumed.with(Serdes.String(), Serdes.String()))
                .processValues(() -> new Tracker(counters))
                .selectKey((key, value) -> value)
                .repartition(Repartitioned.<String, String>as("rekeyed")
                        .withKeySerde(Serdes.String()).withValueSerde(Serdes.String()))
                .processValues(() -> new Tracker(counters))
                .groupByKey()
                .count(Materialized.<String, Long>as(Stores.persistentKeyValueStore(STORE))
                        .withKeySerde(Serdes.String()).withValueSerde(Serdes.Long()));
        return builder.build();
    }

    static int run(Flags flags) throws Exception {
        String bootstrap = flags.get("bootstrap", "localhost:9092");
        String appId = flags.get("application-id", "reference-app");
        String input = flags.get("input-topic", "input");
        GroupProtocol protocol = GroupProtocol.parse(flags.get("group-protocol", "classic"));
        // Under the streams protocol Kafka Streams never consults task.assignor.class: the broker assigns.
        PlannerParts parts = PlannerParts.from(flags, protocol);
        boolean plugin = parts.plugin();
        if (flags.getBool("plugin", true) && !plugin) {
            System.err.println("--plugin ignored: the streams group protocol has no client-side assignor");
        }
        Map<String, Object> client = ClientProperties.from(flags);
        Events events = new Events(flags.get("events", null));
        Counters counters = new Counters(events);
        if (flags.getBool("create-topics", true)) {
            createTopics(bootstrap, input, flags.getInt("partitions", 12), parts.compactedTopics(flags), client);
        }
        Properties props = new Properties();
        // First: the app's own settings below cannot be changed by the file (it holds connection settings only).
        props.putAll(client);
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, appId);
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        String stateDir = flags.has("state-dir") ? flags.get("state-dir", "")
                : Files.createTempDirectory("reference-app").toString();
        props.put(StreamsConfig.STATE_DIR_CONFIG, stateDir);
        props.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, flags.getInt("threads", 1));
        props.put(StreamsConfig.GROUP_PROTOCOL_CONFIG, protocol.config);
        props.put(StreamsConfig.NUM_STANDBY_REPLICAS_CONFIG, flags.getInt("standbys", 0));
        props.put(StreamsConfig.ACCEPTABLE_RECOVERY_LAG_CONFIG, flags.getLong("acceptable-recovery-lag", 10000));
        props.put(StreamsConfig.MAX_WARMUP_REPLICAS_CONFIG, flags.getInt("max-warmup-replicas", 2));
        long probing = flags.getLong("probing-interval-ms", 600000);
        if (probing < 60000) {
            // Kafka Streams refuses less; a plan's own interval (which may be shorter) still applies when honored.
            System.err.println("--probing-interval-ms " + probing + " raised to Kafka's minimum 60000");
            probing = 60000;
        }
        props.put(StreamsConfig.PROBING_REBALANCE_INTERVAL_MS_CONFIG, probing);
        props.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, flags.getLong("commit-interval-ms", 1000));
        // No record cache: every count update reaches the changelog, so tests can build big changelogs fast.
        props.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, flags.getLong("cache-bytes", 0));
        // Under the streams protocol session and heartbeat timing are group configs on the broker
        // (streams.session.timeout.ms), not consumer settings.
        if (flags.has("session-timeout-ms") && protocol == GroupProtocol.CLASSIC) {
            // Kafka Streams does not leave the group on close: the coordinator waits out the session timeout
            // before the next rebalance, so tests that stop instances want it short.
            int session = flags.getInt("session-timeout-ms", 45000);
            props.put(StreamsConfig.mainConsumerPrefix(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG), session);
            props.put(StreamsConfig.mainConsumerPrefix(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG),
                    Math.max(100, session / 3));
        }
        if (flags.has("rocksdb-memory-mb")) {
            props.put(StreamsConfig.ROCKSDB_CONFIG_SETTER_CLASS_CONFIG, BoundedRocksDb.class);
            props.put(BoundedRocksDb.MEMORY_BYTES, flags.getLong("rocksdb-memory-mb", 0) * 1024 * 1024);
        }
        if (flags.has("application-server")) {
            props.put(StreamsConfig.APPLICATION_SERVER_CONFIG, flags.get("application-server", ""));
        }
        props.putAll(parts.properties(flags, stateDir));
        Topology topology = topology(input, counters);
        Map<String, Integer> storeSubtopology = RestoredOffsetsListener.storeSubtopologies(topology.describe());
        KafkaStreams streams = new KafkaStreams(topology, props);
        CountDownLatch stopped = new CountDownLatch(1);
        AtomicBoolean closing = new AtomicBoolean();
        RestoreEvents restoreEvents = new RestoreEvents(events, storeSubtopology);
        StandbyEvents standbyEvents = new StandbyEvents(events);
        if (parts.restoredReports()) { // the reference app's own listeners receive every callback as delegates
            RestoredOffsetsListener.register(streams, topology, props, restoreEvents, standbyEvents);
        } else {
            streams.setGlobalStateRestoreListener(restoreEvents);
            streams.setStandbyUpdateListener(standbyEvents);
        }
        streams.setStateListener((now, before) -> {
            if (now == KafkaStreams.State.ERROR || now == KafkaStreams.State.NOT_RUNNING) {
                stopped.countDown();
            }
        });
        CountDownLatch closed = new CountDownLatch(1);
        AtomicBoolean closedCleanly = new AtomicBoolean();
        // The status main decided (0, or 1 when Streams failed or main threw); -1 while none: a signal stops us.
        AtomicInteger exitStatus = new AtomicInteger(-1);
        // Idempotent: SIGTERM, stdin EOF and a failed Streams may all ask at once; whoever comes second
        // waits for the first to finish, so the JVM never exits halfway through closing the stores.
        Runnable shutdown = () -> {
            if (!closing.compareAndSet(false, true)) {
                try {
                    closed.await(40, TimeUnit.SECONDS);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
                return;
            }
            try {
                streams.close(Duration.ofSeconds(30));
                counters.flush();
                standbyEvents.flush();
                events.emit("shutdown", "processed", counters.totals());
                events.close();
                closedCleanly.set(true);
            } catch (IOException | RuntimeException e) {
                System.err.println("shutdown: " + e);
            } finally {
                stopped.countDown();
                closed.countDown();
            }
        };
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            shutdown.run();
            // On SIGTERM the JVM would exit 143 even after a clean close, yet a stop on request is a normal end
            // (0). So the hook ends the JVM itself, with main's status when main decided one (System.exit, an
            // exception, or main finishing while a signal arrived). Halting is safe: the stores and the events
            // file are closed, and this is the app's only hook.
            int status = exitStatus.get();
            Runtime.getRuntime().halt(status >= 0 ? status : closedCleanly.get() ? 0 : 1);
        }, "reference-app-shutdown"));
        if (flags.getBool("exit-on-stdin-eof", false)) {
            Thread watcher = new Thread(() -> {
                try (InputStream in = System.in) {
                    byte[] buf = new byte[256];
                    while (in.read(buf) >= 0) {
                        continue;
                    }
                } catch (IOException e) {
                    // A broken stdin means the parent is gone, same as EOF.
                }
                stopped.countDown();
            }, "reference-app-stdin");
            watcher.setDaemon(true);
            watcher.start();
        }
        try {
            return runUntilStopped(streams, events, appId, plugin, protocol, counters, standbyEvents, stopped,
                    shutdown, exitStatus);
        } catch (Exception | Error e) {
            exitStatus.compareAndSet(-1, 1);
            throw e;
        }
    }

    private static int runUntilStopped(KafkaStreams streams, Events events, String appId, boolean plugin,
            GroupProtocol protocol, Counters counters, StandbyEvents standbyEvents, CountDownLatch stopped,
            Runnable shutdown, AtomicInteger exitStatus)
            throws InterruptedException {
        streams.start();
        events.emit("start", "process_id", processId(streams), "application_id", appId, "plugin", plugin,
                "group_protocol", protocol.config);
        Map<String, List<String>> lastAssigned = new HashMap<>();
        while (!stopped.await(200, TimeUnit.MILLISECONDS)) {
            Map<String, List<String>> assigned = assignment(streams);
            if (!assigned.equals(lastAssigned)) {
                lastAssigned = assigned;
                events.emit("assigned", "active", assigned.get("active"), "standby", assigned.get("standby"));
            }
            counters.maybeEmit();
            standbyEvents.maybeEmit();
        }
        int status = streams.state() == KafkaStreams.State.ERROR ? 1 : 0;
        shutdown.run();
        exitStatus.compareAndSet(-1, status);
        return status;
    }

    private static String processId(KafkaStreams streams) {
        try {
            // Kafka Streams keeps its process id in the state directory; clientInstanceIds is not it.
            for (ThreadMetadata t : streams.metadataForLocalThreads()) {
                String name = t.threadName();
                int at = name.indexOf("-StreamThread-");
                String prefix = at > 0 ? name.substring(0, at) : name;
                if (prefix.length() >= 36) {
                    return prefix.substring(prefix.length() - 36);
                }
            }
        } catch (RuntimeException e) {
            // Not started yet.
        }
        return "";
    }

    static Map<String, List<String>> assignment(KafkaStreams streams) {
        Set<String> active = new TreeSet<>();
        Set<String> standby = new TreeSet<>();
        try {
            for (ThreadMetadata t : streams.metadataForLocalThreads()) {
                for (TaskMetadata task : t.activeTasks()) {
                    active.add(task.taskId().toString());
                }
                for (TaskMetadata task : t.standbyTasks()) {
                    standby.add(task.taskId().toString());
                }
            }
        } catch (RuntimeException e) {
            // Streams is shutting down.
        }
        Map<String, List<String>> out = new HashMap<>();
        out.put("active", new ArrayList<>(active));
        out.put("standby", new ArrayList<>(standby));
        return out;
    }

    static void createTopics(String bootstrap, String input, int partitions, List<String> compacted,
            Map<String, Object> client) {
        Map<String, Object> conf = new HashMap<>(client);
        conf.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        try (Admin admin = Admin.create(conf)) {
            Set<String> existing = admin.listTopics().names().get(30, TimeUnit.SECONDS);
            List<NewTopic> wanted = new ArrayList<>();
            if (!existing.contains(input)) {
                wanted.add(new NewTopic(input, partitions, (short) 1));
            }
            for (String t : compacted) {
                if (!existing.contains(t)) {
                    wanted.add(new NewTopic(t, 1, (short) 1).configs(Map.of(TopicConfig.CLEANUP_POLICY_CONFIG,
                            TopicConfig.CLEANUP_POLICY_COMPACT)));
                }
            }
            if (!wanted.isEmpty()) {
                admin.createTopics(wanted).all().get(30, TimeUnit.SECONDS);
            }
        } catch (Exception e) {
            // Another instance may have created them first; Streams reports a missing input topic itself.
            System.err.println("creating topics: " + e);
        }
    }

    /** Per-task record counts, emitted as {@code processed} at most once a second. */
    static final class Counters {
        private final Events events;
        private final TaskTally processed;
        private final Map<String, AtomicLong> totals = new ConcurrentHashMap<>();

        Counters(Events events) {
            this.events = events;
            this.processed = new TaskTally(events, "processed");
        }

        void count(String task) {
            processed.add(task, 1);
            totals.computeIfAbsent(task, k -> new AtomicLong()).incrementAndGet();
        }

        long total(String task) {
            AtomicLong n = totals.get(task);
            return n == null ? 0 : n.get();
        }

        Map<String, Long> totals() {
            Map<String, Long> out = new TreeMap<>();
            totals.forEach((k, v) -> out.put(k, v.get()));
            return out;
        }

        void maybeEmit() {
            processed.maybeEmit();
        }

        void flush() {
            processed.flush();
        }

        void started(String task) {
            events.emit("processing", "task", task);
        }

        void stopped(String task) {
            events.emit("stop", "task", task, "processed", total(task));
        }
    }

    /** Counts records per task and marks when a task starts and stops processing (init and close). */
    static final class Tracker implements FixedKeyProcessor<String, String, String> {
        private final Counters counters;
        private FixedKeyProcessorContext<String, String> context;
        private String task;

        Tracker(Counters counters) {
            this.counters = counters;
        }

        @Override
        public void init(FixedKeyProcessorContext<String, String> context) {
            this.context = context;
            this.task = context.taskId().toString();
            counters.started(task);
        }

        @Override
        public void process(FixedKeyRecord<String, String> record) {
            counters.count(task);
            context.forward(record);
        }

        @Override
        public void close() {
            counters.stopped(task);
        }
    }

    /** Restoration of active tasks, from Kafka Streams' global restore listener. */
    static final class RestoreEvents implements StateRestoreListener {
        private final Events events;
        private final Map<String, Integer> storeSubtopology;

        RestoreEvents(Events events, Map<String, Integer> storeSubtopology) {
            this.events = events;
            this.storeSubtopology = storeSubtopology;
        }

        private String task(TopicPartition tp, String store) {
            // A changelog partition is its task's partition; the store names the subtopology.
            Integer sub = storeSubtopology.get(store);
            return (sub == null ? "?" : sub.toString()) + "_" + tp.partition();
        }

        @Override
        public void onRestoreStart(TopicPartition tp, String store, long startOffset, long endOffset) {
            events.emit("restore_start", "task", task(tp, store), "store", store, "start_offset", startOffset,
                    "end_offset", endOffset);
        }

        @Override
        public void onBatchRestored(TopicPartition tp, String store, long batchEndOffset, long numRestored) {
            // Start and end are enough for the tests; a line per batch would flood the event log.
        }

        @Override
        public void onRestoreEnd(TopicPartition tp, String store, long totalRestored) {
            events.emit("restore_end", "task", task(tp, store), "store", store, "restored", totalRestored);
        }
    }

    /**
     * Records loaded into standby stores (hot standbys and warmups alike: KIP-924 has one role for both), per
     * task as {@code standby_restored} at most once a second, and {@code standby_suspended} when a standby is
     * promoted or moves away.
     */
    static final class StandbyEvents implements StandbyUpdateListener {
        private final Events events;
        private final TaskTally loaded;

        StandbyEvents(Events events) {
            this.events = events;
            this.loaded = new TaskTally(events, "standby_restored");
        }

        @Override
        public void onUpdateStart(TopicPartition tp, String store, long startingOffset) {
            // Loading is what the benchmark counts; where it starts is in the suspension event's offsets.
        }

        @Override
        public void onBatchLoaded(TopicPartition tp, String store, TaskId task, long batchEndOffset, long batchSize,
                long currentEndOffset) {
            loaded.add(task.toString(), batchSize);
        }

        @Override
        public void onUpdateSuspended(TopicPartition tp, String store, long storeOffset, long currentEndOffset,
                SuspendReason reason) {
            loaded.flush();
            events.emit("standby_suspended", "partition", tp.partition(), "store", store, "store_offset",
                    storeOffset, "end_offset", currentEndOffset, "reason", reason.name());
        }

        void maybeEmit() {
            loaded.maybeEmit();
        }

        void flush() {
            loaded.flush();
        }
    }
}
