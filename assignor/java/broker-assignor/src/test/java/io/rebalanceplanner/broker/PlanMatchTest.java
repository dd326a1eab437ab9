package io.rebalanceplanner.broker;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.rebalanceplanner.core.PlanVerifier;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.junit.jupiter.api.Test;

class PlanMatchTest {
    static final long NOW = PlanCacheTest.NOW;
    static final String TAG = "rebalance.planner.group";

    private final Signer signer = new Signer();
    private final Topology topology = new Topology(Map.of("0", 2), Set.of("0"));

    private PlanCache.Snapshot plans(String... groupAndPids) {
        PlanCache cache = new PlanCache(new PlanVerifier(signer.verifyKeys(), 60_000), 100);
        for (String spec : groupAndPids) {
            String[] parts = spec.split(":");
            String group = parts[0];
            String[] pids = parts[1].split(",");
            Map<String, Map<String, List<String>>> target = pids.length == 1
                    ? Map.of(pids[0], Map.of("active", List.of("0_0", "0_1")))
                    : Map.of(pids[0], Map.of("active", List.of("0_0")), pids[1], Map.of("active", List.of("0_1")));
            cache.offer(group.getBytes(StandardCharsets.UTF_8), signer.plan(group, "plan-" + group, NOW,
                    NOW + 3_600_000, Signer.configs(100, 2, 0), target, List.of()), NOW);
        }
        cache.publish(true, null);
        return cache.snapshot();
    }

    private GroupView view(Specs specs) throws UnfitGroupException {
        return GroupView.of(specs.build(), topology, TAG);
    }

    @Test
    void uniqueGroupNamingAMemberProcessMatches() throws UnfitGroupException {
        Specs specs = new Specs();
        specs.member("m1", "p1");
        specs.member("m2", "p2");
        PlanMatch m = PlanMatch.find(plans("g:p1,p2", "h:q1,q2"), view(specs));
        assertTrue(m.found());
        assertEquals("g", m.groupId());
        assertEquals("plan-g", m.entry().plan().planId());
    }

    @Test
    void noPlanNamingAnyMemberIsNoPlan() throws UnfitGroupException {
        Specs specs = new Specs();
        specs.member("m1", "z1");
        PlanMatch m = PlanMatch.find(plans("g:p1,p2"), view(specs));
        assertEquals("no_plan", m.code());
    }

    @Test
    void twoPlansNamingTheMembersAreAmbiguous() throws UnfitGroupException {
        Specs specs = new Specs();
        specs.member("m1", "p1");
        specs.member("m2", "q1");
        PlanMatch m = PlanMatch.find(plans("g:p1,p2", "h:q1,q2"), view(specs));
        assertEquals("ambiguous_plan", m.code());
        assertTrue(m.detail().contains("g") && m.detail().contains("h"), m.detail());
    }

    @Test
    void groupTagNamesTheGroupAndWinsOverProcessIds() throws UnfitGroupException {
        Specs specs = new Specs();
        specs.member("m1", "p1").tag(TAG, "h");
        specs.member("m2", "p2").tag(TAG, "h");
        PlanMatch m = PlanMatch.find(plans("g:p1,p2", "h:q1,q2"), view(specs));
        assertTrue(m.found());
        assertEquals("h", m.groupId());
    }

    @Test
    void membersTaggedWithDifferentGroupsAreAmbiguous() throws UnfitGroupException {
        Specs specs = new Specs();
        specs.member("m1", "p1").tag(TAG, "g");
        specs.member("m2", "p2").tag(TAG, "h");
        assertEquals("ambiguous_plan", PlanMatch.find(plans("g:p1,p2", "h:q1,q2"), view(specs)).code());
    }

    @Test
    void groupWhosePlanWasWithdrawnStaysMatchedForItsLedgerToSaySo() throws UnfitGroupException {
        PlanCache cache = new PlanCache(new PlanVerifier(signer.verifyKeys(), 60_000), 100);
        byte[] key = "g".getBytes(StandardCharsets.UTF_8);
        cache.offer(key, signer.plan("g", "plan-g", NOW, NOW + 3_600_000, Signer.configs(100, 2, 0),
                Map.of("p1", Map.of("active", List.of("0_0", "0_1"))), List.of()), NOW);
        cache.offer(key, signer.withdrawal("g", "plan-g", NOW + 1), NOW + 1);
        cache.publish(true, null);
        Specs specs = new Specs();
        specs.member("m1", "p1").tag(TAG, "g");
        PlanMatch tagged = PlanMatch.find(cache.snapshot(), view(specs));
        assertTrue(tagged.found());
        assertEquals("withdrawn", tagged.entry().ledger().choice(NOW + 2).reasonCode());
        Specs untagged = new Specs();
        untagged.member("m1", "p1");
        PlanMatch byProcess = PlanMatch.find(cache.snapshot(), view(untagged));
        assertEquals("g", byProcess.groupId(), "matched by the withdrawn plan's process ids: a replay says replayed");
        Specs stranger = new Specs();
        stranger.member("m2", "p2");
        assertEquals("no_plan", PlanMatch.find(cache.snapshot(), view(stranger)).code());
    }

    @Test
    void taggedGroupWithoutAPlanIsNoPlanEvenIfAProcessIdMatchesAnother() throws UnfitGroupException {
        Specs specs = new Specs();
        specs.member("m1", "p1").tag(TAG, "other");
        assertEquals("no_plan", PlanMatch.find(plans("g:p1,p2"), view(specs)).code());
    }
}
