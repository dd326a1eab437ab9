package io.rebalanceplanner.reference;

import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * {@code --produce N --keys K}: N records whose values cycle through K keys, as fast as the broker takes them.
 * Every value becomes a count update, so N records give N changelog records spread over the count tasks.
 */
final class Producer {
    private Producer() {}

    static void run(Flags flags) throws Exception {
        String bootstrap = flags.get("bootstrap", "localhost:9092");
        String topic = flags.get("input-topic", "input");
        long n = flags.getLong("produce", 0);
        int keys = flags.getInt("keys", 1000);
        Map<String, Object> client = ClientProperties.from(flags);
        ReferenceApp.createTopics(bootstrap, topic, flags.getInt("partitions", 12), List.of(), client);
        Map<String, Object> props = new HashMap<>(client);
        props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        props.put(ProducerConfig.LINGER_MS_CONFIG, 20);
        props.put(ProducerConfig.BATCH_SIZE_CONFIG, 256 * 1024);
        props.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, "lz4");
        props.put(ProducerConfig.ACKS_CONFIG, "1");
        long start = System.currentTimeMillis();
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(props)) {
            for (long i = 0; i < n; i++) {
                String key = "k" + (i % keys);
                producer.send(new ProducerRecord<>(topic, key, key));
            }
            producer.flush();
        }
        long ms = Math.max(1, System.currentTimeMillis() - start);
        System.out.println("{\"produced\":" + n + ",\"keys\":" + keys + ",\"ms\":" + ms + "}");
    }
}
