package io.rebalanceplanner.kafka;

import io.rebalanceplanner.core.CanonicalJson;
import io.rebalanceplanner.core.PlanLedger;
import io.rebalanceplanner.core.PlanVerifier;
import io.rebalanceplanner.core.Verdict;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The plugin's plans reader ({@link TopicPlanSource}) on a real broker, driven line by line over stdin by
 * {@code tests/integration/test_java_plan_readers_log_start.py}. Not a test by itself.
 *
 * <p>Arguments: {@code bootstrap topic verifyKeys group...}; one source and one {@link PlanLedger} per group, as
 * each application's leader holds them. Every {@code read} line on stdin reads each group's new records, folds
 * them as {@code Honoring} does, and prints one JSON line: per group, the plan ids of the records read
 * (null for an unreadable one), the verified record, and the plan a leader would honor. EOF ends it.
 */
public final class PlanSourceProbe {
    private static final long READ_TIMEOUT_MS = 30_000;

    private PlanSourceProbe() {}

    public static void main(String[] args) throws IOException {
        String bootstrap = args[0];
        String topic = args[1];
        PlanVerifier verifier = new PlanVerifier(PlanVerifier.parseKeys(args[2]), 60_000);
        Map<String, TopicPlanSource> sources = new LinkedHashMap<>();
        Map<String, PlanLedger> ledgers = new LinkedHashMap<>();
        for (int i = 3; i < args.length; i++) {
            String group = args[i];
            sources.put(group, new TopicPlanSource(Map.of("bootstrap.servers", bootstrap), topic, "probe-" + group));
            ledgers.put(group, new PlanLedger(group));
        }
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        try {
            for (String line = in.readLine(); line != null; line = in.readLine()) {
                if (!line.strip().equals("read")) {
                    continue;
                }
                Map<String, Object> groups = new LinkedHashMap<>();
                sources.forEach((group, source) -> groups.put(group, read(group, source, ledgers, verifier)));
                System.out.println(CanonicalJson.string(groups));
                System.out.flush();
            }
        } finally {
            sources.values().forEach(TopicPlanSource::close);
        }
    }

    private static Map<String, Object> read(String group, TopicPlanSource source, Map<String, PlanLedger> ledgers,
            PlanVerifier verifier) {
        long now = System.currentTimeMillis();
        Map<String, Object> out = new LinkedHashMap<>();
        List<byte[]> fresh;
        try {
            fresh = source.records(group, READ_TIMEOUT_MS);
        } catch (PlansUnreadableException e) {
            out.put("error", e.getMessage());
            return out;
        }
        List<String> ids = new ArrayList<>();
        PlanLedger ledger = ledgers.get(group);
        for (byte[] value : fresh) {
            ids.add(verifier.check(value, group, now, null).planId());
            ledger = ledger.offer(value, verifier, now);
        }
        ledgers.put(group, ledger);
        PlanLedger.Choice choice = ledger.choice(now);
        out.put("read", ids);
        out.put("verified", verdict(ledger.verified()));
        out.put("honored", choice.plan() == null ? null : choice.plan().planId());
        return out;
    }

    /** A verified record as the probe prints it, or null. */
    private static Map<String, Object> verdict(Verdict v) {
        if (v == null) {
            return null;
        }
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("plan_id", v.planId());
        out.put("outcome", v.outcome().name());
        out.put("sequence", v.sequence());
        return out;
    }
}
