package io.rebalanceplanner.broker;

import io.rebalanceplanner.core.CanonicalJson;
import io.rebalanceplanner.core.Verdict;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * The broker-side assignor's plans reader ({@link PlanReader}, its own background thread) on a real broker, with the
 * settings a broker would hand it, driven over stdin by {@code tests/integration/test_java_plan_readers_log_start.py}.
 * Not a test by itself.
 *
 * <p>Arguments: {@code bootstrap topic verifyKeys group...}. Every {@code show} line on stdin prints one JSON line:
 * whether the topic was read to its end once, the reader's record counts, and per group what its cache holds
 * (the verified record and the plan to follow). EOF ends it.
 */
public final class PlanReaderProbe {
    private PlanReaderProbe() {}

    public static void main(String[] args) throws IOException {
        Map<String, String> configs = new LinkedHashMap<>();
        configs.put(BrokerAssignorSettings.CLIENT_PREFIX + "bootstrap.servers", args[0]);
        configs.put(BrokerAssignorSettings.PLANS_TOPIC, args[1]);
        configs.put(BrokerAssignorSettings.VERIFY_KEYS, args[2]);
        configs.put(BrokerAssignorSettings.DECISIONS_ENABLED, "false");
        configs.put(BrokerAssignorSettings.POLL_MS, "100");
        try (PlanReader reader = new PlanReader(BrokerAssignorSettings.from(configs))) {
            reader.start();
            BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
            for (String line = in.readLine(); line != null; line = in.readLine()) {
                if (line.strip().equals("show")) {
                    System.out.println(CanonicalJson.string(show(reader.cache(), args)));
                    System.out.flush();
                }
            }
        }
    }

    private static Map<String, Object> show(PlanCache cache, String[] args) {
        PlanCache.Snapshot snapshot = cache.snapshot();
        Map<String, Object> groups = new LinkedHashMap<>();
        for (int i = 3; i < args.length; i++) {
            PlanCache.Entry entry = snapshot.entry(args[i]);
            Map<String, Object> held = new LinkedHashMap<>();
            if (entry != null) {
                Verdict v = entry.ledger().verified();
                held.put("verified", v == null ? null : Map.of("plan_id", v.planId(), "outcome", v.outcome().name(),
                        "sequence", v.sequence()));
                held.put("honored", entry.plan() == null ? null : entry.plan().planId());
            }
            groups.put(args[i], entry == null ? null : held);
        }
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("loaded", snapshot.loaded());
        out.put("read_error", snapshot.readError());
        out.put("verified_records", cache.verifiedRecords());
        out.put("rejected_records", cache.rejectedRecords());
        out.put("groups", groups);
        return out;
    }
}
