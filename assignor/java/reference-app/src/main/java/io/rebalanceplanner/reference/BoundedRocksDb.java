package io.rebalanceplanner.reference;

import java.util.Map;
import org.apache.kafka.streams.state.RocksDBConfigSetter;
import org.rocksdb.BlockBasedTableConfig;
import org.rocksdb.Cache;
import org.rocksdb.LRUCache;
import org.rocksdb.Options;
import org.rocksdb.WriteBufferManager;

/**
 * Every RocksDB store of this JVM shares one small block cache, and their memtables count against it.
 *
 * <p>Kafka Streams' default gives each store its own 50 MB block cache and up to three 16 MB memtables, so an
 * instance's native memory grows with the tasks it holds (actives, standbys and warmups alike). Set by
 * {@code --rocksdb-memory-mb N}: N MB in all, memtables within it, however many stores the instance opens.
 */
public final class BoundedRocksDb implements RocksDBConfigSetter {
    /** The Streams property (set by the app) holding the JVM's RocksDB budget in bytes. */
    static final String MEMORY_BYTES = "reference.app.rocksdb.memory.bytes";
    private static final long MEMTABLE_BYTES = 1024 * 1024;

    private static Cache cache;
    private static WriteBufferManager writeBuffers;

    private static synchronized Cache shared(long bytes) {
        if (cache == null) {
            cache = new LRUCache(bytes);
            // Memtables are charged to the cache: the budget covers both, as the operator set it.
            writeBuffers = new WriteBufferManager(bytes / 2, cache);
        }
        return cache;
    }

    @Override
    public void setConfig(String storeName, Options options, Map<String, Object> configs) {
        long bytes = Long.parseLong(String.valueOf(configs.get(MEMORY_BYTES)));
        BlockBasedTableConfig table = (BlockBasedTableConfig) options.tableFormatConfig();
        table.setBlockCache(shared(bytes));
        table.setCacheIndexAndFilterBlocks(true);
        options.setWriteBufferManager(writeBuffers);
        options.setWriteBufferSize(MEMTABLE_BYTES);
        options.setMaxWriteBufferNumber(2);
        options.setTableFormatConfig(table);
    }

    @Override
    public void close(String storeName, Options options) {
        // The cache and write buffer manager outlive any one store: they are the JVM's.
    }
}
