package io.rebalanceplanner;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.rebalanceplanner.core.RestoredOffsets;
import io.rebalanceplanner.core.RestoredOffsets.TaskRestore;
import io.rebalanceplanner.core.Task;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Queue;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.streams.processor.StandbyUpdateListener.SuspendReason;
import org.apache.kafka.streams.processor.TaskId;
import org.junit.jupiter.api.Test;

/** The listener's per-task restores and what it publishes, through Kafka Streams' callbacks. */
class RestoredOffsetsListenerTest {
    private final List<Map<String, byte[]>> published = new ArrayList<>();
    private final AtomicLong now = new AtomicLong(1_000);
    private final RestoredOffsetsListener listener = new RestoredOffsetsListener("orders", "p1",
            Map.of("counts", 0, "totals", 0, "other", 1), published::add, now::get, null, null, Runnable::run);
    private final TopicPartition counts3 = new TopicPartition("orders-counts-changelog", 3);
    private final TopicPartition totals3 = new TopicPartition("orders-totals-changelog", 3);

    @Test
    void aTaskWithTwoStoresIsOneRestoreSummedOverBoth() throws Exception {
        listener.onRestoreStart(counts3, "counts", 0, 100);
        now.set(1_500);
        listener.onRestoreStart(totals3, "totals", 0, 50);
        listener.onBatchRestored(counts3, "counts", 60, 60);
        listener.onBatchRestored(totals3, "totals", 50, 50);
        listener.onRestoreEnd(totals3, "totals", 50);
        listener.onBatchRestored(counts3, "counts", 100, 40);
        listener.onRestoreEnd(counts3, "counts", 100);
        assertEquals(Map.of(new Task(0, 3), new TaskRestore(150, 1_000)), listener.restores());
        assertEquals(2, published.size()); // one per changelog partition whose restore ended
        byte[] last = published.get(1).get("orders/p1/restored");
        RestoredOffsets.Report report = RestoredOffsets.decode("orders/p1/restored", last);
        assertEquals(listener.restores(), report.restores());
    }

    @Test
    void aNewRestoreOfTheSameTaskReplacesTheLastOne() throws Exception {
        listener.onRestoreStart(counts3, "counts", 0, 100);
        listener.onBatchRestored(counts3, "counts", 100, 100);
        listener.onRestoreSuspended(counts3, "counts", 100);
        now.set(9_000);
        listener.onRestoreStart(counts3, "counts", 100, 130);
        listener.onBatchRestored(counts3, "counts", 130, 30);
        listener.onRestoreEnd(counts3, "counts", 30);
        assertEquals(Map.of(new Task(0, 3), new TaskRestore(30, 9_000)), listener.restores());
    }

    @Test
    void aWarmupPromotedToActiveIsOneRestoreFromTheWarmupsStart() throws Exception {
        listener.onUpdateStart(counts3, "counts", 0);
        listener.onBatchLoaded(counts3, "counts", new TaskId(0, 3), 900, 900, 1_000);
        now.set(5_000);
        listener.onUpdateSuspended(counts3, "counts", 900, 1_000, SuspendReason.PROMOTED);
        listener.onRestoreStart(counts3, "counts", 900, 1_000);
        listener.onBatchRestored(counts3, "counts", 1_000, 100);
        listener.onRestoreEnd(counts3, "counts", 100);
        assertEquals(Map.of(new Task(0, 3), new TaskRestore(1_000, 1_000)), listener.restores());
        // A standby that moved away and comes back later begins a new restore.
        listener.onUpdateSuspended(counts3, "counts", 1_000, 1_000, SuspendReason.MIGRATED);
        now.set(7_000);
        listener.onUpdateStart(counts3, "counts", 1_000);
        listener.onBatchLoaded(counts3, "counts", new TaskId(0, 3), 1_010, 10, 1_010);
        assertEquals(Map.of(new Task(0, 3), new TaskRestore(10, 7_000)), listener.restores());
    }

    @Test
    void aStoreOutsideTheTopologyIsIgnoredAndAFailingSinkNeverThrows() {
        RestoredOffsetsListener failing = new RestoredOffsetsListener("orders", "p1", Map.of(), records -> {
            throw new IllegalStateException("broker down");
        }, now::get, null, null, Runnable::run);
        failing.onRestoreStart(counts3, "counts", 0, 10);
        failing.onBatchRestored(counts3, "counts", 10, 10);
        failing.onRestoreEnd(counts3, "counts", 10);
        assertTrue(failing.restores().isEmpty());
    }

    @Test
    void restoresEndingWhileAPublishIsQueuedShareItAndItCarriesTheLatest() throws Exception {
        Queue<Runnable> queued = new ArrayDeque<>();
        RestoredOffsetsListener later = new RestoredOffsetsListener("orders", "p1", Map.of("counts", 0, "other", 1),
                published::add, now::get, null, null, queued::add);
        TopicPartition other3 = new TopicPartition("orders-other-changelog", 3);
        later.onRestoreStart(counts3, "counts", 0, 100);
        later.onRestoreStart(other3, "other", 0, 7);
        later.onBatchRestored(counts3, "counts", 100, 100);
        later.onRestoreEnd(counts3, "counts", 100);
        later.onBatchRestored(other3, "other", 7, 7);
        later.onRestoreEnd(other3, "other", 7);
        assertEquals(1, queued.size()); // nothing published on the restoring thread; one publish for both ends
        assertTrue(published.isEmpty());
        queued.remove().run();
        assertEquals(1, published.size());
        RestoredOffsets.Report report = RestoredOffsets.decode("orders/p1/restored",
                published.get(0).get("orders/p1/restored"));
        assertEquals(Map.of(new Task(0, 3), new TaskRestore(100, 1_000), new Task(1, 3), new TaskRestore(7, 1_000)),
                report.restores());
        later.onRestoreSuspended(counts3, "counts", 100); // after the publish ran: a publish of its own
        assertEquals(1, queued.size());
    }

    @Test
    void recordsStillLoadingArePublishedWithinTheIntervalOncePerInterval() throws Exception {
        List<Map.Entry<Runnable, Long>> delayed = new ArrayList<>();
        RestoredOffsetsListener standby = new RestoredOffsetsListener("orders", "p1", Map.of("counts", 0),
                published::add, now::get, null, null, Runnable::run,
                (task, delayMs) -> delayed.add(Map.entry(task, delayMs)), 10_000);
        standby.onUpdateStart(counts3, "counts", 0); // a hot standby: its loading never ends
        standby.onBatchLoaded(counts3, "counts", new TaskId(0, 3), 400, 400, 1_000);
        standby.onBatchLoaded(counts3, "counts", new TaskId(0, 3), 1_000, 600, 1_000);
        assertEquals(1, delayed.size()); // one delayed publish for both batches
        assertEquals(10_000L, delayed.get(0).getValue());
        assertTrue(published.isEmpty());
        delayed.remove(0).getKey().run();
        RestoredOffsets.Report report = RestoredOffsets.decode("orders/p1/restored",
                published.get(0).get("orders/p1/restored"));
        assertEquals(Map.of(new Task(0, 3), new TaskRestore(1_000, 1_000)), report.restores()); // the latest sum
        standby.onBatchLoaded(counts3, "counts", new TaskId(0, 3), 1_010, 10, 1_010);
        assertEquals(1, delayed.size()); // loading goes on: the next interval gets its own publish
        standby.onBatchLoaded(counts3, "counts", new TaskId(0, 3), 1_010, 0, 1_010);
        assertEquals(1, delayed.size());
    }

    @Test
    void withIntervalZeroOnlyTheEndOfARestoreIsPublished() {
        List<Runnable> delayed = new ArrayList<>();
        RestoredOffsetsListener endsOnly = new RestoredOffsetsListener("orders", "p1", Map.of("counts", 0),
                published::add, now::get, null, null, Runnable::run, (task, delayMs) -> delayed.add(task), 0);
        endsOnly.onUpdateStart(counts3, "counts", 0);
        endsOnly.onBatchLoaded(counts3, "counts", new TaskId(0, 3), 400, 400, 1_000);
        assertTrue(delayed.isEmpty() && published.isEmpty());
        endsOnly.onUpdateSuspended(counts3, "counts", 400, 1_000, SuspendReason.MIGRATED);
        assertEquals(1, published.size());
    }
}
