package io.rebalanceplanner.broker;

import io.rebalanceplanner.core.PlanVerifier;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.apache.kafka.coordinator.group.api.streams.assignor.GroupAssignment;
import org.apache.kafka.coordinator.group.api.streams.assignor.TaskAssignor;
import org.apache.kafka.coordinator.group.streams.assignor.GroupSpecImpl;
import org.apache.kafka.coordinator.group.streams.assignor.StickyTaskAssignor;

/**
 * Times {@code assign} on one scale-out group: ours following a plan, and Kafka's sticky on the same spec. Run by
 * {@code bench/broker_assignor_bench.py}; prints one JSON line per assignor. Not a test: timings never assert.
 *
 * <p>Arguments: {@code [tasks] [members] [iterations]} (defaults 1000, 100, 300). Half the subtopologies are
 * stateful with one standby; the last tenth of the processes are new (no state), and the plan moves every tenth
 * task to them (the old owner keeps a standby), so the honored step places warm-ups and keeps those actives where
 * they run.
 */
public final class AssignBench {
    private AssignBench() {}

    public static void main(String[] args) {
        int tasks = args.length > 0 ? Integer.parseInt(args[0]) : 1000;
        int members = args.length > 1 ? Integer.parseInt(args[1]) : 100;
        int iterations = args.length > 2 ? Integer.parseInt(args[2]) : 300;
        int subtopologies = 10;
        int partitions = Math.max(1, tasks / subtopologies);
        Map<String, Integer> parts = new HashMap<>();
        Set<String> stateful = new HashSet<>();
        for (int s = 0; s < subtopologies; s++) {
            parts.put(String.valueOf(s), partitions);
            if (s % 2 == 0) {
                stateful.add(String.valueOf(s));
            }
        }
        Topology topology = new Topology(parts, stateful);
        int old = Math.max(1, members - members / 10);
        Specs specs = new Specs().standbys(1);
        Map<String, Map<String, List<String>>> target = new HashMap<>();
        List<String> order = new ArrayList<>();
        int i = 0;
        for (int s = 0; s < subtopologies; s++) {
            boolean isStateful = stateful.contains(String.valueOf(s));
            for (int p = 0; p < partitions; p++, i++) {
                String task = s + "_" + p;
                int current = i % old;
                // A planner's scale-out: every tenth task moves to a new process, the rest stay where they run.
                int owner = i % 10 == 9 && members > old ? old + (i / 10) % (members - old) : current;
                target.computeIfAbsent(pid(owner), k -> new HashMap<>())
                        .computeIfAbsent("active", k -> new ArrayList<>()).add(task);
                specs.member("m" + current, pid(current)).active(task);
                if (isStateful) {
                    int standby = owner == current ? (current + 1) % old : current;
                    target.computeIfAbsent(pid(standby), k -> new HashMap<>())
                            .computeIfAbsent("standby", k -> new ArrayList<>()).add(task);
                    int currentStandby = (current + 1) % old;
                    specs.member("m" + currentStandby, pid(currentStandby)).standby(task).offset(task, 99_990)
                            .end(task, 100_000);
                    if (owner != current) {
                        order.add(task);
                    }
                }
            }
        }
        for (int m = 0; m < members; m++) {
            specs.member("m" + m, pid(m));
            target.computeIfAbsent(pid(m), k -> new HashMap<>());
        }
        GroupSpecImpl spec = specs.build();
        Signer signer = new Signer();
        PlanCache cache = new PlanCache(new PlanVerifier(signer.verifyKeys(), 60_000), 10);
        long now = System.currentTimeMillis();
        cache.offer("bench".getBytes(StandardCharsets.UTF_8), signer.plan("bench", "plan-bench", now,
                now + 3_600_000, Signer.configs(10_000, 2, 1), target, order), now);
        cache.publish(true, null);
        List<Decision> decisions = new ArrayList<>();
        PlanFollowingTaskAssignor ours = new PlanFollowingTaskAssignor(BrokerAssignorSettings.from(Map.of()), cache,
                d -> decisions.size() < 1 && decisions.add(d), System::currentTimeMillis);
        ours.assign(spec, topology);
        Decision first = decisions.get(0);
        if (first.planId() == null) {
            throw new IllegalStateException("the bench plan was not honored: " + first.fallbackReason());
        }
        int total = partitions * subtopologies;
        TaskAssignor sticky = new StickyTaskAssignor();
        for (int w = 0; w < Math.max(50, iterations / 2); w++) {
            ours.assign(spec, topology);
            sticky.assign(spec, topology);
        }
        // Interleaved, so that both see the same load on a shared machine.
        // Wall time, and the thread's CPU time: on a machine shared with other builds the CPU time is what the
        // assignor itself costs, the wall time includes waiting for a core.
        java.lang.management.ThreadMXBean cpu = java.lang.management.ManagementFactory.getThreadMXBean();
        double[] oursMs = new double[iterations];
        double[] stickyMs = new double[iterations];
        double[] oursCpuMs = new double[iterations];
        double[] stickyCpuMs = new double[iterations];
        GroupAssignment last = null;
        for (int k = 0; k < iterations; k++) {
            long c0 = cpu.getCurrentThreadCpuTime();
            long t0 = System.nanoTime();
            last = ours.assign(spec, topology);
            long t1 = System.nanoTime();
            long c1 = cpu.getCurrentThreadCpuTime();
            sticky.assign(spec, topology);
            long t2 = System.nanoTime();
            long c2 = cpu.getCurrentThreadCpuTime();
            oursMs[k] = (t1 - t0) / 1e6;
            stickyMs[k] = (t2 - t1) / 1e6;
            oursCpuMs[k] = (c1 - c0) / 1e6;
            stickyCpuMs[k] = (c2 - c1) / 1e6;
        }
        report("plan", ours.name(), oursMs, oursCpuMs, total, members, first.warmups(), last);
        report("sticky", sticky.name(), stickyMs, stickyCpuMs, total, members, 0, last);
    }

    private static String pid(int i) {
        return String.format("process-%04d", i);
    }

    private static void report(String mode, String assignor, double[] ms, double[] cpuMs, int tasks, int members,
            int warmups, GroupAssignment assigned) {
        Arrays.sort(ms);
        Arrays.sort(cpuMs);
        int n = ms.length;
        System.out.printf(java.util.Locale.ROOT,
                "{\"bench\": \"broker_assignor\", \"mode\": \"%s\", \"assignor\": \"%s\", \"tasks\": %d, "
                        + "\"members\": %d, \"iterations\": %d, \"median_ms\": %.3f, \"p90_ms\": %.3f, "
                        + "\"max_ms\": %.3f, \"cpu_median_ms\": %.3f, \"cpu_p90_ms\": %.3f, \"warmups\": %d, "
                        + "\"assigned_members\": %d}%n",
                mode, assignor, tasks, members, n, ms[n / 2], ms[(int) (n * 0.9)], ms[n - 1], cpuMs[n / 2],
                cpuMs[(int) (n * 0.9)], warmups, assigned.members().size());
    }
}
