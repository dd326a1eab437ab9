package io.rebalanceplanner.kafka;

import io.rebalanceplanner.core.ClientTasks;
import io.rebalanceplanner.core.Deferral;
import io.rebalanceplanner.core.PlanLedger;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Kafka clients and memory that must survive the assignor: Kafka Streams instantiates and configures a new
 * {@code TaskAssignor} on every rebalance (AssignorConfiguration.customTaskAssignor), so anything kept on the
 * instance would be rebuilt, and a consumer would re-read the whole plans topic each time.
 */
public final class SharedClients {
    private static final Logger LOG = LoggerFactory.getLogger(SharedClients.class);
    private static final Map<String, TopicPlanSource> PLAN_SOURCES = new ConcurrentHashMap<>();
    private static final Map<String, TopicReportSink> REPORT_SINKS = new ConcurrentHashMap<>();
    private static final Map<String, AdminEndOffsets> END_OFFSETS = new ConcurrentHashMap<>();
    private static final Map<String, PlanLedger> PLAN_LEDGERS = new ConcurrentHashMap<>();
    private static final Map<String, Remembered> REMEMBERED = new ConcurrentHashMap<>();

    /**
     * What this JVM last assigned as the group's leader, and the departures it is waiting out. In memory only:
     * a new leader starts without them, so a member that left just before the leader changed is not waited for.
     *
     * @param assignment the last assignment returned, or null when it is not known by role
     */
    public record Remembered(long atMs, Map<String, ClientTasks> assignment,
            Map<String, Deferral.Departure> departures) {}

    static {
        Runtime.getRuntime().addShutdownHook(new Thread(SharedClients::closeAll, "rebalance-planner-close"));
    }

    private SharedClients() {}

    public static PlanSource planSource(PlannerSettings s) {
        String key = s.applicationId() + "\u0000" + s.plansTopic() + "\u0000" + s.clientProperties();
        return PLAN_SOURCES.computeIfAbsent(key, k -> new TopicPlanSource(s.clientProperties(), s.plansTopic(),
                s.applicationId() + "-rebalance-planner-plans"));
    }

    public static ReportSink reportSink(PlannerSettings s) {
        String key = s.reportsTopic() + "\u0000" + s.reportsTimeoutMs() + "\u0000" + s.clientProperties();
        return REPORT_SINKS.computeIfAbsent(key, k -> new TopicReportSink(s.clientProperties(), s.reportsTopic(),
                s.applicationId() + "-rebalance-planner-reports", s.reportsTimeoutMs()));
    }

    public static EndOffsetSource endOffsets(PlannerSettings s) {
        String key = s.applicationId() + "\u0000" + s.clientProperties();
        return END_OFFSETS.computeIfAbsent(key, k -> new AdminEndOffsets(s.clientProperties(),
                s.applicationId() + "-rebalance-planner-offsets"));
    }

    /**
     * The group's plan records as this JVM has folded them (replay floor, verified plan, refused newest record);
     * an empty ledger before the first read.
     */
    public static PlanLedger planLedger(String groupId) {
        return PLAN_LEDGERS.getOrDefault(groupId, new PlanLedger(groupId));
    }

    public static void planLedger(String groupId, PlanLedger ledger) {
        PLAN_LEDGERS.put(groupId, ledger);
    }

    /** Forget the plan ledgers and the remembered assignments (tests). */
    public static void forgetHonored() {
        PLAN_LEDGERS.clear();
        REMEMBERED.clear();
    }

    /** What the last rebalance this JVM led for the group left behind, or null. */
    public static Remembered remembered(String groupId) {
        return REMEMBERED.get(groupId);
    }

    public static void remember(String groupId, Remembered remembered) {
        REMEMBERED.put(groupId, remembered);
    }

    /** Close every shared consumer and producer; the next rebalance opens new ones. */
    public static void closeAll() {
        List<AutoCloseable> all = new ArrayList<>();
        all.addAll(PLAN_SOURCES.values());
        all.addAll(REPORT_SINKS.values());
        all.addAll(END_OFFSETS.values());
        PLAN_SOURCES.clear();
        REPORT_SINKS.clear();
        END_OFFSETS.clear();
        for (AutoCloseable c : all) {
            try {
                c.close();
            } catch (Exception e) {
                LOG.warn("closing a shared client failed: {}", e.toString());
            }
        }
    }
}
