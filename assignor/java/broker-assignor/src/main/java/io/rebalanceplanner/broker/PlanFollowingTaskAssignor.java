package io.rebalanceplanner.broker;

import io.rebalanceplanner.core.ClientTasks;
import io.rebalanceplanner.core.FitCheck;
import io.rebalanceplanner.core.Honor;
import io.rebalanceplanner.core.LagIndex;
import io.rebalanceplanner.core.LiveAssignment;
import io.rebalanceplanner.core.Plan;
import io.rebalanceplanner.core.PlanLedger;
import java.lang.management.ManagementFactory;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.LongSupplier;
import java.util.function.Supplier;
import javax.management.ObjectName;
import org.apache.kafka.common.Configurable;
import org.apache.kafka.coordinator.group.api.streams.assignor.GroupAssignment;
import org.apache.kafka.coordinator.group.api.streams.assignor.GroupSpec;
import org.apache.kafka.coordinator.group.api.streams.assignor.TaskAssignor;
import org.apache.kafka.coordinator.group.api.streams.assignor.TopologyDescriber;
import org.apache.kafka.coordinator.group.streams.assignor.StickyTaskAssignor;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A KIP-1357 broker-side streams task assignor that follows approved, Ed25519-signed plans and otherwise gives
 * exactly what Kafka's built-in {@code sticky} assignor gives.
 *
 * <p>Install with {@code group.streams.assignors=sticky,io.rebalanceplanner.broker.PlanFollowingTaskAssignor};
 * a group selects it with the group config {@code streams.assignor.name=rebalance-planner}. One instance serves
 * every such group on the coordinator's threads: {@link #assign} reads an immutable cache snapshot, does no I/O,
 * and never throws. The constructor and {@link #configure} have no side effects; the background reader starts at
 * the first assignment. See docs/broker-assignor.md.
 */
public final class PlanFollowingTaskAssignor implements TaskAssignor, Configurable, AutoCloseable {
    public static final String NAME = "rebalance-planner";
    private static final Logger LOG = LoggerFactory.getLogger(PlanFollowingTaskAssignor.class);
    /** One reader per configuration per JVM, whatever number of instances the broker builds. */
    private static final Map<String, PlanReader> READERS = new ConcurrentHashMap<>();

    private final TaskAssignor sticky = new StickyTaskAssignor();
    private final LongSupplier clock;
    private final BrokerAssignorMetrics metrics;
    private volatile BrokerAssignorSettings settings;
    private volatile String configError = "not configured";
    private volatile Supplier<PlanCache.Snapshot> plans;
    private volatile DecisionSink decisions;
    private volatile PlanReader reader;

    /** What the broker calls (by reflection). */
    public PlanFollowingTaskAssignor() {
        this.clock = System::currentTimeMillis;
        this.metrics = new BrokerAssignorMetrics(() -> reader == null ? null : reader.cache());
    }

    /** For tests and the benchmark: a fixed cache, sink and clock instead of the background reader. */
    PlanFollowingTaskAssignor(BrokerAssignorSettings settings, PlanCache cache, DecisionSink decisions,
            LongSupplier clock) {
        this.clock = clock;
        this.metrics = new BrokerAssignorMetrics(() -> cache);
        this.settings = settings;
        this.configError = null;
        this.plans = cache::snapshot;
        this.decisions = decisions;
    }

    @Override
    public String name() {
        return NAME;
    }

    /** The broker's {@code originals()}; a bad setting is remembered and every group gets sticky, saying why. */
    @Override
    public void configure(Map<String, ?> configs) {
        try {
            settings = BrokerAssignorSettings.from(configs);
            configError = null;
        } catch (RuntimeException e) {
            configError = e.getMessage();
            LOG.error("{} is misconfigured; every group that selects it gets Kafka's sticky assignment: {}", NAME,
                    configError);
        }
    }

    public BrokerAssignorMetrics metrics() {
        return metrics;
    }

    @Override
    public GroupAssignment assign(GroupSpec spec, TopologyDescriber topology) {
        try {
            return assignOrFallback(spec, topology);
        } catch (Throwable t) {
            // Only a spec that even reading fails on gets here (logging and recording are guarded below).
            LOG.error("{}: the group spec could not be read; members keep their active tasks", NAME, t);
            try {
                return AssignmentCheck.lastResort(spec, topology);
            } catch (Throwable u) {
                return new GroupAssignment(Map.of());
            }
        }
    }

    private GroupAssignment assignOrFallback(GroupSpec spec, TopologyDescriber topology) {
        long now = clock.getAsLong();
        Decided decided;
        try {
            decided = decide(spec, topology, now);
        } catch (Throwable t) {
            decided = Decided.fallback(null, "internal_error", t.getClass().getName() + ": " + t.getMessage(), null);
            LOG.error("{} failed; giving Kafka's sticky assignment", NAME, t);
        }
        GroupAssignment assignment = decided.assignment;
        if (assignment == null) {
            // Beyond our bounds Kafka's sticky would hold the coordinator thread for minutes (it enumerates every
            // task the topology claims): such a group keeps what it runs instead.
            assignment = "out_of_bounds".equals(decided.code) ? AssignmentCheck.lastResort(spec, topology)
                    : stickyOrLastResort(spec, topology);
            metrics.recordFallback(decided.code, decided.reason());
            if ("no_plan".equals(decided.code)) {
                LOG.info("streams group {}: sticky assignment ({})", decided.name(spec), decided.reason());
            } else {
                LOG.warn("streams group {}: sticky assignment instead of the plan: {}", decided.name(spec),
                        decided.reason());
            }
        } else {
            metrics.recordHonored();
            LOG.info("streams group {}: honoring plan {} ({} warm-up(s), {})", decided.groupId, decided.planId,
                    decided.warmups, decided.followup ? "moves pending" : "target reached");
        }
        record(spec, now, decided);
        return assignment;
    }

    private Decided decide(GroupSpec spec, TopologyDescriber topology, long now) {
        BrokerAssignorSettings s = settings;
        if (configError != null || s == null) {
            return Decided.fallback(null, "invalid_config", configError, null);
        }
        PlanCache.Snapshot snapshot = snapshot(s);
        if (!snapshot.loaded()) {
            return Decided.fallback(null, "plans_unreadable", "the plans topic " + s.plansTopic()
                    + " has not been read to its end yet" + (snapshot.readError() == null ? ""
                    : " (" + snapshot.readError() + ")"), null);
        }
        GroupView view;
        try {
            view = GroupView.of(spec, topology, s.groupTag());
        } catch (UnfitGroupException e) {
            return Decided.fallback(null, e.code(), e.getMessage(), null);
        }
        PlanMatch match = PlanMatch.find(snapshot, view);
        String rejected = match.entry() == null ? null : match.entry().lastRejection();
        if (!match.found()) {
            return Decided.fallback(match.groupId(), match.code(), match.detail(), null);
        }
        // The classic plugin's rule (PlanLedger.choice): the verified plan while valid, whatever the refused newest
        // record was; else none, reporting the refused record first (what the operators last published), then why
        // the verified record is not usable (expired, withdrawn).
        PlanLedger.Choice choice = match.entry().ledger().choice(now);
        if (choice.plan() == null) {
            return Decided.fallback(match.groupId(), choice.reasonCode(), choice.detail(), rejected);
        }
        Plan plan = choice.plan();
        FitCheck.Unfit unfit = FitCheck.unfitReason(plan.target(), view.group, plan.configs());
        if (unfit != null) {
            // A kept plan that does not fit: the refused newest record is the news, as for the plugin.
            return choice.reason() != null
                    ? Decided.fallback(match.groupId(), choice.reasonCode(), choice.detail(), rejected)
                    : Decided.fallback(match.groupId(), unfit.code(), "plan " + plan.planId() + ": " + unfit.detail(),
                            rejected);
        }
        LagIndex lags = new LagIndex(view.processIds, view.lags, view.noStateLags,
                plan.configs().acceptableRecoveryLag());
        LiveAssignment honored = Honor.honorTarget(FitCheck.targetFor(plan.target(), view.group), view.group,
                plan.configs(), plan.moveOrder(), lags);
        GroupAssignment assignment = MemberSplit.toKafka(spec, view, honored.assignment());
        AssignmentCheck.requireValid(spec, view, assignment);
        int warmups = 0;
        for (ClientTasks t : honored.assignment().values()) {
            warmups += t.warmup().size();
        }
        return new Decided(assignment, match.groupId(), plan.planId(), null, null, honored.followupRebalance(),
                warmups, rejected);
    }

    private PlanCache.Snapshot snapshot(BrokerAssignorSettings s) {
        Supplier<PlanCache.Snapshot> source = plans;
        if (source == null) {
            synchronized (this) {
                if (plans == null) {
                    // The first assignment starts the reader: the broker builds and configures about a dozen
                    // instances at startup (and tools build broker configs too), and uses one of them.
                    PlanReader r = READERS.computeIfAbsent(s.identity(), k -> {
                        PlanReader created = new PlanReader(s);
                        created.start();
                        return created;
                    });
                    reader = r;
                    decisions = r;
                    plans = r.cache()::snapshot;
                    registerMBean();
                }
                source = plans;
            }
        }
        return source.get();
    }

    private void registerMBean() {
        try {
            ObjectName name = new ObjectName("io.rebalanceplanner:type=BrokerAssignor,name=" + NAME);
            if (!ManagementFactory.getPlatformMBeanServer().isRegistered(name)) {
                ManagementFactory.getPlatformMBeanServer().registerMBean(metrics, name);
            }
        } catch (Exception e) {
            LOG.warn("the {} metrics MBean was not registered: {}", NAME, e.toString());
        }
    }

    private void record(GroupSpec spec, long now, Decided decided) {
        DecisionSink sink = decisions;
        if (sink == null) {
            return;
        }
        try {
            TreeSet<String> pids = new TreeSet<>(io.rebalanceplanner.core.CodePoints.ORDER);
            int members = 0;
            for (String m : spec.memberIds()) {
                members++;
                if (pids.size() < Decision.MAX_PROCESS_IDS) {
                    pids.add(spec.memberMetadata(m).processId());
                }
            }
            Decision d = new Decision(decided.groupId, List.copyOf(pids), now, decided.planId,
                    decided.assignment == null ? decided.reason() : null, decided.followup, decided.warmups, members,
                    decided.rejected);
            if (!sink.offer(d)) {
                metrics.recordNotPublished();
            }
        } catch (Throwable t) {
            metrics.recordNotPublished();
            LOG.warn("the decision was not queued: {}", t.toString());
        }
    }

    /** Kafka's sticky result; if even sticky refuses the spec, every member keeps its actives and the rest spread. */
    private GroupAssignment stickyOrLastResort(GroupSpec spec, TopologyDescriber topology) {
        try {
            return sticky.assign(spec, topology);
        } catch (Throwable t) {
            LOG.error("Kafka's sticky assignor failed too; members keep their active tasks", t);
            return AssignmentCheck.lastResort(spec, topology);
        }
    }

    /** Stops the background reader this instance started (other instances never started one). */
    @Override
    public void close() {
        PlanReader r = reader;
        BrokerAssignorSettings s = settings;
        if (r != null && s != null && READERS.remove(s.identity(), r)) {
            r.close();
        }
    }

    /** One assignment's outcome: an honored assignment, or the reason Kafka's sticky result is given. */
    private static final class Decided {
        final GroupAssignment assignment;
        final String groupId;
        final String planId;
        final String code;
        final String detail;
        final boolean followup;
        final int warmups;
        final String rejected;

        Decided(GroupAssignment assignment, String groupId, String planId, String code, String detail,
                boolean followup, int warmups, String rejected) {
            this.assignment = assignment;
            this.groupId = groupId;
            this.planId = planId;
            this.code = code;
            this.detail = detail;
            this.followup = followup;
            this.warmups = warmups;
            this.rejected = rejected;
        }

        static Decided fallback(String groupId, String code, String detail, String rejected) {
            return new Decided(null, groupId, null, code, detail, false, 0, rejected);
        }

        String reason() {
            return code + ": " + detail;
        }

        String name(GroupSpec spec) {
            if (groupId != null) {
                return groupId;
            }
            List<String> some = new ArrayList<>();
            for (String m : spec.memberIds()) {
                some.add(m);
                if (some.size() == 3) {
                    break;
                }
            }
            return "(unmatched; members " + String.join(", ", some) + (spec.memberIds().size() > 3 ? ", ..." : "")
                    + ")";
        }
    }
}
