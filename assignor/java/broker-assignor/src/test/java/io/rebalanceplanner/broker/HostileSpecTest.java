package io.rebalanceplanner.broker;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;

import io.rebalanceplanner.core.PlanVerifier;
import java.nio.charset.StandardCharsets;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.NoSuchElementException;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.ConcurrentLinkedQueue;
import org.apache.kafka.coordinator.group.api.streams.assignor.AssignmentConfigs;
import org.apache.kafka.coordinator.group.api.streams.assignor.GroupAssignment;
import org.apache.kafka.coordinator.group.api.streams.assignor.GroupSpec;
import org.apache.kafka.coordinator.group.api.streams.assignor.MemberAssignmentMetadata;
import org.apache.kafka.coordinator.group.api.streams.assignor.MemberAssignmentState;
import org.apache.kafka.coordinator.group.api.streams.assignor.TopologyDescriber;
import org.apache.kafka.coordinator.group.streams.assignor.GroupSpecImpl;
import org.apache.kafka.coordinator.group.streams.assignor.StickyTaskAssignor;
import org.junit.jupiter.api.Test;

/** Whatever the broker hands over, {@code assign} returns an assignment and says why it fell back. */
class HostileSpecTest {
    private final Signer signer = new Signer();
    private final PlanCache cache = new PlanCache(new PlanVerifier(signer.verifyKeys(), 60_000), 10);
    private final ConcurrentLinkedQueue<Decision> decisions = new ConcurrentLinkedQueue<>();
    private final PlanFollowingTaskAssignor assignor;

    HostileSpecTest() {
        cache.offer("g".getBytes(StandardCharsets.UTF_8), signer.plan("g", "plan-g", PlanCacheTest.NOW,
                PlanCacheTest.NOW + PlanCacheTest.HOUR, Signer.configs(100, 2, 0),
                Map.of("p1", Map.of("active", List.of("0_0", "0_1"))), List.of()), PlanCacheTest.NOW);
        cache.publish(true, null);
        assignor = new PlanFollowingTaskAssignor(BrokerAssignorSettings.from(Map.of()), cache, decisions::add,
                () -> PlanCacheTest.NOW);
    }

    private String reasonOf(GroupSpec spec, TopologyDescriber topology) {
        GroupAssignment got = assignor.assign(spec, topology);
        assertNotNull(got);
        Decision d = decisions.poll();
        return d == null ? null : d.reasonCode();
    }

    @Test
    void nonNumericSubtopologyFallsBackToSticky() {
        Specs specs = new Specs();
        specs.member("m1", "p1").active("0_0");
        GroupSpecImpl spec = specs.build();
        Topology topology = new Topology(Map.of("orders-join", 2), Set.of("orders-join"));
        assertEquals(new StickyTaskAssignor().assign(spec, topology), assignor.assign(spec, topology));
        assertEquals("unsupported_topology", decisions.poll().reasonCode());
    }

    @Test
    void absurdPartitionCountIsOutOfBounds() {
        Specs specs = new Specs();
        specs.member("m1", "p1");
        assertEquals("out_of_bounds", reasonOf(specs.build(), new Topology(Map.of("0", Integer.MAX_VALUE),
                Set.of())));
        assertEquals("out_of_bounds", reasonOf(specs.build(), new Topology(Map.of("0", -1), Set.of())));
    }

    @Test
    void offsetsAndTasksOutsideTheTopologyAreIgnoredNotTrusted() {
        Specs specs = new Specs();
        specs.member("m1", "p1").active("0_0").active("0_1").active("7_3").offset("0_9", 5).offset("9_0", -7)
                .end("0_0", Long.MIN_VALUE).end("5_5", 3);
        GroupAssignment got = assignor.assign(specs.build(), new Topology(Map.of("0", 2), Set.of("0")));
        assertEquals(Map.of("0", Set.of(0, 1)), got.members().get("m1").activeTasks());
        assertEquals(null, decisions.poll().fallbackReason());
    }

    @Test
    void throwingTopologyStillGetsAnAssignment() {
        Specs specs = new Specs();
        specs.member("m1", "p1").active("0_0");
        TopologyDescriber broken = new TopologyDescriber() {
            @Override
            public List<String> subtopologies() {
                throw new IllegalStateException("boom");
            }

            @Override
            public int maxNumInputPartitions(String subtopologyId) {
                throw new NoSuchElementException(subtopologyId);
            }

            @Override
            public boolean isStateful(String subtopologyId) {
                return true;
            }
        };
        GroupAssignment got = assignor.assign(specs.build(), broken);
        assertNotNull(got);
        assertEquals("internal_error", decisions.poll().reasonCode());
    }

    @Test
    void specWhoseMembersCannotBeReadStillGetsAnAssignment() {
        GroupSpec broken = new GroupSpec() {
            @Override
            public Collection<String> memberIds() {
                throw new IllegalStateException("boom");
            }

            @Override
            public MemberAssignmentMetadata memberMetadata(String memberId) {
                throw new NoSuchElementException(memberId);
            }

            @Override
            public MemberAssignmentState memberAssignmentState(String memberId) {
                throw new NoSuchElementException(memberId);
            }

            @Override
            public AssignmentConfigs configs() {
                return null;
            }
        };
        assertNotNull(assignor.assign(broken, new Topology(Map.of("0", 1), Set.of("0"))));
    }

    @Test
    void memberWithNullsEverywhereGetsAnAssignment() {
        Map<String, MemberAssignmentMetadata> meta = new HashMap<>();
        meta.put("m1", new MemberAssignmentMetadata() {
            @Override
            public Optional<String> instanceId() {
                return Optional.empty();
            }

            @Override
            public Optional<String> rackId() {
                return Optional.empty();
            }

            @Override
            public String processId() {
                return null;
            }

            @Override
            public Map<String, String> clientTags() {
                return null;
            }
        });
        MemberAssignmentState empty = new MemberAssignmentState() {
            @Override
            public Map<String, Set<Integer>> activeTasks() {
                return null;
            }

            @Override
            public Map<String, Set<Integer>> standbyTasks() {
                return null;
            }

            @Override
            public Map<String, Set<Integer>> warmupTasks() {
                return null;
            }

            @Override
            public Map<String, Map<Integer, Long>> taskOffsets() {
                return null;
            }

            @Override
            public Map<String, Map<Integer, Long>> taskEndOffsets() {
                return null;
            }
        };
        GroupSpec spec = new GroupSpec() {
            @Override
            public Collection<String> memberIds() {
                return List.of("m1");
            }

            @Override
            public MemberAssignmentMetadata memberMetadata(String memberId) {
                return meta.get(memberId);
            }

            @Override
            public MemberAssignmentState memberAssignmentState(String memberId) {
                return empty;
            }

            @Override
            public AssignmentConfigs configs() {
                return null;
            }
        };
        GroupAssignment got = assignor.assign(spec, new Topology(Map.of("0", 2), Set.of("0")));
        assertNotNull(got);
        assertEquals(Set.of("m1"), got.members().keySet());
    }

    @Test
    void emptyGroupGetsAnEmptyAssignment() {
        GroupAssignment got = assignor.assign(new Specs().build(), new Topology(Map.of("0", 2), Set.of("0")));
        assertNotNull(got);
    }
}
