package io.rebalanceplanner.streamsgroups;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import org.apache.kafka.clients.admin.StreamsGroupDescription;
import org.apache.kafka.clients.admin.StreamsGroupMemberAssignment;
import org.apache.kafka.clients.admin.StreamsGroupMemberAssignment.TaskIds;
import org.apache.kafka.clients.admin.StreamsGroupMemberDescription;
import org.apache.kafka.clients.admin.StreamsGroupMemberDescription.TaskOffset;
import org.apache.kafka.clients.admin.StreamsGroupSubtopologyDescription;
import org.apache.kafka.clients.admin.StreamsGroupSubtopologyDescription.TopicInfo;
import org.apache.kafka.clients.admin.StreamsGroupTopologyDescriptionStatus;
import org.apache.kafka.common.GroupState;
import org.apache.kafka.common.Node;
import org.junit.jupiter.api.Test;

class GroupJsonTest {
    private static final ObjectMapper MAPPER = new ObjectMapper();

    private static StreamsGroupDescription group() {
        StreamsGroupSubtopologyDescription counting = new StreamsGroupSubtopologyDescription("1", List.of(),
                List.of(), Map.of("app-counts-changelog", new TopicInfo(4, 1, Map.of())),
                Map.of("app-rekeyed-repartition", new TopicInfo(4, 1, Map.of())));
        StreamsGroupMemberAssignment current = new StreamsGroupMemberAssignment(
                List.of(new TaskIds("0", List.of(0, 1)), new TaskIds("1", List.of(2))),
                List.of(new TaskIds("1", List.of(3))), List.of());
        StreamsGroupMemberDescription member = new StreamsGroupMemberDescription("m-1", 7, Optional.empty(),
                Optional.of("rack-a"), "client-1", "/127.0.0.1", 1, "0f0e0d0c-0000-0000-0000-000000000001",
                Optional.of(new StreamsGroupMemberDescription.Endpoint("host-a", 8080)), Map.of("zone", "z1"),
                List.of(new TaskOffset("1", 3, 40L)), List.of(new TaskOffset("1", 3, Long.MAX_VALUE)), current,
                current, false);
        return new StreamsGroupDescription("app", 9, 9, 1, List.of(counting), List.of(member), GroupState.STABLE,
                new Node(1, "localhost", 9092), Set.of(), Optional.empty(),
                StreamsGroupTopologyDescriptionStatus.NOT_REQUESTED, Optional.empty());
    }

    @Test
    void aDescribedGroupKeepsTasksOffsetsTopologyAndOnlyItsConfigs() throws Exception {
        JsonNode line = MAPPER.readTree(MAPPER.writeValueAsString(
                GroupJson.group(group(), Map.of("streams.num.standby.replicas", "1"), null)));
        assertEquals("group", line.get("kind").asText());
        assertEquals("Stable", line.get("state").asText());
        assertEquals(9, line.get("group_epoch").asInt());
        assertTrue(line.get("assignor_name").isNull());
        JsonNode sub = line.get("subtopologies").get(0);
        assertEquals(4, sub.get("state_changelog_topics").get("app-counts-changelog").asInt());
        assertEquals(4, sub.get("repartition_source_topics").get("app-rekeyed-repartition").asInt());
        JsonNode member = line.get("members").get(0);
        assertEquals("0f0e0d0c-0000-0000-0000-000000000001", member.get("process_id").asText());
        assertEquals("rack-a", member.get("rack_id").asText());
        assertEquals("host-a:8080", member.get("user_endpoint").asText());
        assertEquals("z1", member.get("client_tags").get("zone").asText());
        assertEquals("[0,1]", member.get("assignment").get("active").get("0").toString());
        assertEquals("[2]", member.get("assignment").get("active").get("1").toString());
        assertEquals("[3]", member.get("assignment").get("standby").get("1").toString());
        assertEquals("[[\"1\",3,40]]", member.get("task_offsets").toString());
        // Kafka's "unknown" end offset travels as it is: the Python side bounds it.
        assertEquals(Long.MAX_VALUE, member.get("task_end_offsets").get(0).get(2).asLong());
        assertEquals("1", line.get("configs").get("streams.num.standby.replicas").asText());
        assertTrue(line.get("configs_error").isNull());
    }

    @Test
    void unreadableConfigsAreNullWithTheReason() {
        JsonNode line = GroupJson.group(group(), null, "GroupAuthorizationException: denied");
        assertTrue(line.get("configs").isNull());
        assertEquals("GroupAuthorizationException: denied", line.get("configs_error").asText());
    }

    @Test
    void timeoutsOutsideTheirBoundsAreRefused() {
        for (String bad : List.of("0", "-5", "600001", "99999999999", "1e3", "")) {
            assertThrows(IllegalArgumentException.class, () -> StreamsGroupsReader.Arguments.parse(
                    new String[] {"--bootstrap", "b:1", "--timeout-ms", bad}), bad);
        }
    }

    @Test
    void theBootstrapIsRequired() {
        assertThrows(IllegalArgumentException.class, () -> StreamsGroupsReader.Arguments.parse(new String[0]));
        assertThrows(IllegalArgumentException.class,
                () -> StreamsGroupsReader.Arguments.parse(new String[] {"--bootstrap"}));
    }
}
